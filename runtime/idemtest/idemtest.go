package idemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// PoolMaxConns is the MaxConns of the pool New returns: enough for a storm of
// 64 goroutines that each hold a connection, with room to spare. Change it
// with WithPoolConfig.
const PoolMaxConns = 80

const (
	// setupTimeout bounds creating one database and applying its schema.
	setupTimeout = 60 * time.Second
	// cleanupTimeout bounds closing the pool and dropping the database.
	cleanupTimeout = 30 * time.Second
)

// DB is one fresh database on the shared throwaway server (or on
// IDEMGEN_TEST_DATABASE_URL's server).
type DB struct {
	Pool *pgxpool.Pool // connected to the fresh database; closed at test cleanup
	SQL  *sql.DB       // database/sql over Pool's connections (pgx's stdlib driver), for idem.NewSQLStore; closed at test cleanup
	URL  string        // connection string of the fresh database (for tools like goose/dbmate/psql); a postgres:// URL unless IDEMGEN_TEST_DATABASE_URL is in keyword/value form
	Name string        // database name

	srv  *server // the server the database lives on
	note string  // what New logs about the database (citusPlacement)
}

// Option configures New.
type Option func(*options)

type options struct {
	table    string
	noLedger bool
	setup    []string
	poolCfg  []func(*pgxpool.Config)

	migrations *Migrations // set by WithMigrations
}

// WithTable names the ledger table (default idem.DefaultTable). The name may
// be schema-qualified (billing.idempotency_keys); the schema is created first.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithoutLedger leaves the ledger out, for tests that apply their own schema
// (migration tests).
func WithoutLedger() Option { return func(o *options) { o.noLedger = true } }

// WithSetup adds SQL statements run, in order, after the ledger is created:
// the work's own tables, for example. Each string is sent on its own as one
// simple-protocol query: it may hold several statements (which then run in
// one implicit transaction), and a string holding only
// CREATE INDEX CONCURRENTLY works.
func WithSetup(stmts ...string) Option {
	return func(o *options) { o.setup = append(o.setup, stmts...) }
}

// WithPoolConfig lets fn adjust the pool's configuration before it connects,
// e.g. to add a pgx tracer or change MaxConns. Several are applied in order.
func WithPoolConfig(fn func(*pgxpool.Config)) Option {
	return func(o *options) { o.poolCfg = append(o.poolCfg, fn) }
}

// New creates a fresh database for t (CREATE DATABASE with a unique name),
// applies the ledger DDL for the default table unless WithoutLedger, applies
// WithSetup statements, and registers t.Cleanup that closes the pool and DROPs
// the database (WITH (FORCE)).
//
// Failures end the test with t.Fatalf; New never skips.
func New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	o := options{table: idem.DefaultTable}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := getServer()
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db, err := srv.newDB(ctx, t.Name(), o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if db.note != "" {
		t.Log(db.note)
	}
	t.Cleanup(func() {
		if err := db.close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return db
}

// newDB creates a fresh database named after name on s, as New describes. On
// failure nothing is left behind.
func (s *server) newDB(ctx context.Context, name string, o options) (_ *DB, err error) {
	var ledger idem.Ledger
	if !o.noLedger {
		if ledger, err = idem.LedgerSchema(o.table); err != nil {
			return nil, fmt.Errorf("idemtest: ledger table: %w", err)
		}
	}
	var ledgerDDL []string
	if !o.noLedger {
		if ledger.Table.Schema != "" {
			ledgerDDL = append(ledgerDDL, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{ledger.Table.Schema}.Sanitize())
		}
		ledgerDDL = append(ledgerDDL, ledger.DDL()...)
	}
	template := "template0"
	var migrations *migrationSet
	if o.migrations != nil {
		if migrations, err = o.migrations.load(); err != nil {
			return nil, err
		}
		if template, err = s.migrationTemplate(ctx, migrations); err != nil {
			return nil, err
		}
		if template != "template0" {
			migrations = nil // already applied in the template
		}
	}
	if len(ledgerDDL) > 0 {
		// Copying a database that already holds the ledger is faster than
		// running the DDL in every test database.
		tmpl, err := s.template(ctx, ledger.Table.String(), ledgerDDL)
		if err != nil {
			return nil, fmt.Errorf("idemtest: %w%s", err, s.logTail())
		}
		if tmpl != "" {
			template, ledgerDDL = tmpl, nil
		}
	}

	dbName, err := databaseName(name)
	if err != nil {
		return nil, fmt.Errorf("idemtest: %w", err)
	}
	if s.citus != nil {
		// Every node gets the database, with the extension; the
		// coordinator's knows the workers. Its tables' shards live on
		// the workers, so there is no template to copy them from.
		if err := s.citus.CreateDatabase(ctx, dbName); err != nil {
			return nil, fmt.Errorf("idemtest: create database %s on the Citus cluster: %w", dbName, err)
		}
	} else {
		create := "CREATE DATABASE " + pgx.Identifier{dbName}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		if _, err := s.admin.Exec(ctx, create); err != nil {
			return nil, fmt.Errorf("idemtest: create database %s: %w%s", dbName, err, s.logTail())
		}
	}
	db := &DB{Name: dbName, srv: s}
	defer func() {
		if err != nil {
			err = errors.Join(err, db.close())
		}
	}()

	if db.URL, err = withDatabase(s.baseURL, dbName); err != nil {
		return nil, fmt.Errorf("idemtest: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		return nil, fmt.Errorf("idemtest: parse connection string of %s: %w", dbName, err)
	}
	cfg.MaxConns = PoolMaxConns
	for _, fn := range o.poolCfg {
		fn(cfg)
	}
	if db.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("idemtest: connect to %s: %w", dbName, err)
	}
	db.SQL = stdlib.OpenDBFromPool(db.Pool)

	if migrations != nil {
		if err := applyURL(ctx, db.URL, migrations); err != nil {
			return nil, err
		}
	}
	if s.citus != nil {
		if db.note, err = s.citusSetup(ctx, db.URL, o, ledgerDDL); err != nil {
			return nil, fmt.Errorf("idemtest: set up %s: %w", dbName, err)
		}
	} else if stmts := append(ledgerDDL, o.setup...); len(stmts) > 0 {
		// A connection of its own, not the pool: a tracer or hook added with
		// WithPoolConfig sees only the test's own queries.
		if err := execURL(ctx, db.URL, stmts); err != nil {
			return nil, fmt.Errorf("idemtest: set up %s: %w", dbName, err)
		}
	}
	return db, nil
}

// citusSetup runs, on a Citus cluster, the ledger DDL, distributes the
// ledger it made by scope (citusDistributeLedger), checks where the
// migrations left theirs (citusPlacement: an error, or a note), then runs
// WithSetup's statements.
func (s *server) citusSetup(ctx context.Context, url string, o options, ledgerDDL []string) (note string, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	err = execAll(ctx, conn, ledgerDDL)
	switch {
	case err != nil:
	case o.migrations != nil:
		note, err = citusPlacement(ctx, conn, o.table)
	case !o.noLedger:
		err = citusDistributeLedger(ctx, conn, o.table)
	}
	if err == nil {
		err = execAll(ctx, conn, o.setup)
	}
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("close connection: %w", cerr)
	}
	return note, err
}

// execURL runs stmts in order on one new connection to the database at url.
func execURL(ctx context.Context, url string, stmts []string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	err = execAll(ctx, conn, stmts)
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("close connection: %w", cerr)
	}
	return err
}

// execAll runs stmts in order, each on its own (outside a transaction block,
// so CREATE INDEX CONCURRENTLY works). Each is sent as one simple-protocol
// query, so one string may hold several statements. It stops at the first
// error, which quotes the statement.
func execAll(ctx context.Context, conn *pgx.Conn, stmts []string) error {
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("%w\nin statement:\n%s", err, s)
		}
	}
	return nil
}

// close closes the pool and drops the database. A pool whose connections are
// still checked out would block Close forever, so Close is given a deadline
// and the database is dropped WITH (FORCE) regardless.
func (db *DB) close() error {
	var errs []error
	if db.SQL != nil {
		if err := db.SQL.Close(); err != nil {
			errs = append(errs, fmt.Errorf("idemtest: close the *sql.DB of %s: %w", db.Name, err))
		}
	}
	if db.Pool != nil {
		closed := make(chan struct{})
		go func() {
			db.Pool.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(cleanupTimeout):
			errs = append(errs, fmt.Errorf("idemtest: the pool of %s still has connections checked out %s after the test ended; release every acquired connection and finish every transaction", db.Name, cleanupTimeout))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if db.srv.citus != nil {
		if err := db.srv.citus.DropDatabase(ctx, db.Name); err != nil {
			errs = append(errs, fmt.Errorf("idemtest: drop database %s on the Citus cluster: %w", db.Name, err))
		}
	} else if err := pgserver.DropDatabase(ctx, db.srv.admin, db.Name); err != nil {
		errs = append(errs, fmt.Errorf("idemtest: drop database %s: %w", db.Name, err))
	}
	return errors.Join(errs...)
}

// databaseName makes a unique database name that shows which test made it:
// idemtest_<test name, lower-cased and cut>_<random hex>.
func databaseName(testName string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
		if b.Len() >= 36 {
			break
		}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	slug := strings.Trim(b.String(), "_")
	if slug == "" {
		slug = "db"
	}
	return "idemtest_" + slug + "_" + hex.EncodeToString(rnd[:]), nil
}

// withDatabase returns connString with its database replaced by db. It
// accepts both URL and keyword/value connection strings.
func withDatabase(connString, db string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("parse connection URL: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value form: a later setting overrides an earlier one.
	return connString + " dbname=" + db, nil
}
