package idemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// EnvDatabaseURL names the environment variable that points the tests at an
// existing server instead of a throwaway one.
const EnvDatabaseURL = "IDEMGEN_TEST_DATABASE_URL"

const (
	// tempPrefix prefixes the temporary directory of every server this package
	// starts; stale directories are found by it.
	tempPrefix = "idemtest-pg-"
	// maxConnections is the server's max_connections: storms of 64 goroutines
	// each hold a connection, and tests in one binary may run in parallel.
	maxConnections = 300
	// startTimeout bounds initdb plus server start-up.
	startTimeout = 60 * time.Second
)

// settings are the server settings of a throwaway server, after pgserver's
// own (fsync=off): the rest of durability off too (the data is thrown away),
// and then extra.
func settings(extra []string) []string {
	return append([]string{
		"synchronous_commit=off",
		"full_page_writes=off",
		"max_connections=" + strconv.Itoa(maxConnections),
		"shared_buffers=64MB",
		"max_wal_size=1GB",
	}, extra...)
}

const noServerHelp = "idemtest: no PostgreSQL to test against: " + EnvDatabaseURL + " is not set and no initdb/postgres binaries were found on PATH or under /usr/lib/postgresql/*/bin.\n" +
	"Either install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql-15; Fedora: dnf install postgresql-server; macOS: brew install postgresql@15), " +
	"or set " + EnvDatabaseURL + " to a server whose user may CREATE DATABASE, e.g. " + EnvDatabaseURL + "='postgres://postgres:secret@localhost:5432/postgres?sslmode=disable'"

// server is the PostgreSQL instance the tests of this binary create their
// databases on: either one this package started or the one named by
// EnvDatabaseURL.
type server struct {
	admin   *pgxpool.Pool // connected to the maintenance database; creates and drops test databases
	baseURL string        // connection string of the maintenance database

	// pg is the server this package started (a Citus cluster's
	// coordinator); nil for EnvDatabaseURL's.
	pg *pgserver.Server
	// citus is the Citus cluster this package started (EnvCitus,
	// StartCitus), whose databases are made on every node; nil otherwise.
	citus *pgserver.Citus

	// templates maps a ledger table name to a template database that
	// already holds that ledger, so a test database is one CREATE DATABASE
	// instead of CREATE DATABASE plus the DDL. Only a server this package
	// started has them: on a shared server they would outlive the tests.
	tmplMu    sync.Mutex
	templates map[string]string
}

// shared is the server of this test binary. It is process-wide state on
// purpose, the one exception to the project's no-globals rule: starting
// PostgreSQL takes seconds, so every test in the binary shares one server and
// gets its own database on it; the server must outlive any single test; and
// generated tests cannot rely on a TestMain to own it, because the user's
// package may already have its own. It is guarded by its mutex, started
// lazily by the first New, and stopped by Main or, failing that, by the
// kernel when the test binary exits.
var shared struct {
	mu      sync.Mutex
	started bool
	srv     *server
	err     error
}

// getServer returns the shared server, starting it on first use. A start-up
// failure is remembered so every later test reports it without retrying.
func getServer() (*server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared.srv, shared.err = startServer(ctx)
	}
	return shared.srv, shared.err
}

// Main is a TestMain helper: it runs the tests, stops the server this package
// started (if any) and exits with the tests' exit code.
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.srv, shared.err = nil, errors.New("idemtest: the server was stopped by idemtest.Main")
	shared.mu.Unlock()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// startServer connects to EnvDatabaseURL if set, and otherwise starts a
// throwaway server, or a throwaway Citus cluster if EnvCitus is set.
func startServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		admin, err := openAdmin(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("idemtest: %s: %w", EnvDatabaseURL, err)
		}
		return &server{admin: admin, baseURL: u}, nil
	}
	bin, err := findBinaries(pgserver.DebianBinaries)
	if err != nil {
		return nil, err
	}
	workers, err := citusWorkers()
	if err != nil {
		return nil, err
	}
	if workers > 0 {
		ctx, cancel := context.WithTimeout(ctx, 2*startTimeout) // three servers, the extension in two databases each
		defer cancel()
		return startCitus(ctx, pgserver.CitusConfig{Config: pgserver.Config{Bin: bin}, Workers: workers})
	}
	return startLocal(ctx, bin, nil)
}

// openAdmin opens the small pool used to create and drop test databases.
func openAdmin(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// findBinaries returns the directory holding initdb and postgres: PATH first,
// then the highest version among the directories matching pattern
// (pgserver.DebianBinaries outside tests).
func findBinaries(pattern string) (string, error) {
	dir, err := pgserver.FindBinaries(pattern)
	if errors.Is(err, pgserver.ErrNoBinaries) {
		return "", errors.New(noServerHelp)
	}
	return dir, err
}

// startLocal starts a throwaway server from the binaries in bin, on a unix
// socket in a fresh temporary directory. extra are server settings given
// after the package's own.
func startLocal(ctx context.Context, bin string, extra []string) (_ *server, err error) {
	pg, err := pgserver.Start(ctx, pgserver.Config{Bin: bin, Prefix: tempPrefix, Settings: settings(extra)})
	if errors.Is(err, pgserver.ErrNoServerUser) {
		return nil, fmt.Errorf("idemtest: %w; run the tests as a non-root user, create a postgres user (useradd --system postgres), or set %s", err, EnvDatabaseURL)
	}
	if err != nil {
		return nil, fmt.Errorf("idemtest: %w", err)
	}
	srv := &server{pg: pg, baseURL: pg.URL("postgres"), templates: map[string]string{}}
	defer func() {
		if err != nil {
			_ = pg.Close()
		}
	}()
	admin, err := openAdmin(ctx, srv.baseURL)
	if err != nil {
		return nil, fmt.Errorf("idemtest: connect to the server: %w%s", err, srv.logTail())
	}
	srv.admin = admin
	return srv, nil
}

// template returns a template database holding the ledger for table, made by
// running ddl once, or "" when the server keeps no templates.
func (s *server) template(ctx context.Context, table string, ddl []string) (string, error) {
	return s.templateDB(ctx, table, func(ctx context.Context, conn *pgx.Conn) error {
		return execAll(ctx, conn, ddl)
	})
}

// templateDB returns the template database made for key, making it first by
// running setup on a connection to a new database, or "" when the server
// keeps no templates. The template refuses connections, which also keeps
// autovacuum out of it: CREATE DATABASE waits for every session connected to
// its template to leave.
func (s *server) templateDB(ctx context.Context, key string, setup func(context.Context, *pgx.Conn) error) (string, error) {
	if s.templates == nil {
		return "", nil
	}
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	if name, ok := s.templates[key]; ok {
		return name, nil
	}
	name := "idemtest_template_" + strconv.Itoa(len(s.templates))
	quoted := pgx.Identifier{name}.Sanitize()
	if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoted); err != nil {
		return "", fmt.Errorf("drop old template %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+quoted+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("create template %s: %w", name, err)
	}
	u, err := withDatabase(s.baseURL, name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", fmt.Errorf("connect to template %s: %w", name, err)
	}
	err = setup(ctx, conn)
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("close connection: %w", cerr)
	}
	if err != nil {
		return "", fmt.Errorf("set up template %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+quoted+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("mark %s as a template: %w", name, err)
	}
	s.templates[key] = name
	return name, nil
}

// logTail returns the end of the server log, formatted for an error
// message, or "" for a server this package did not start.
func (s *server) logTail() string {
	if s.pg == nil {
		return ""
	}
	return s.pg.LogTail()
}

// stop closes the admin pool and, for a server (or cluster) this package
// started, stops it and removes its directories.
func (s *server) stop() error {
	if s.admin != nil {
		s.admin.Close()
	}
	if s.citus != nil {
		if err := s.citus.Close(); err != nil {
			return fmt.Errorf("idemtest: stop the Citus cluster: %w", err)
		}
		return nil
	}
	if s.pg == nil {
		return nil
	}
	if err := s.pg.Close(); err != nil {
		return fmt.Errorf("idemtest: stop the server: %w", err)
	}
	return nil
}
