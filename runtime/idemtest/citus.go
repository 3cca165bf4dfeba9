package idemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// EnvCitus names the environment variable that makes the server of a test
// binary a Citus cluster: a coordinator and as many workers as its value
// says ("2"), started by this package (the extension must be installed:
// scripts/install-citus.sh). Each test's database is then made on every
// node and the pool connects to the coordinator. The ledger this package
// creates itself is distributed by scope; with WithMigrations the
// migrations alone decide what is distributed (citusPlacement). It is ignored when EnvDatabaseURL is set, and by Start, whose
// server is always a single one (StartCitus starts a cluster).
const EnvCitus = "IDEMGEN_TEST_CITUS"

// citusPrefix prefixes the temporary directories of the Citus nodes this
// package starts.
const citusPrefix = "idemtest-citus-"

// citusWorkers reads EnvCitus: 0 when it is not set, else the number of
// workers.
func citusWorkers() (int, error) {
	v := os.Getenv(EnvCitus)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("idemtest: %s=%q: want the number of Citus workers, 1 or more", EnvCitus, v)
	}
	return n, nil
}

// StartCitus starts a throwaway Citus cluster, a coordinator and
// cfg.Workers workers (pgserver.StartCitus; this package's server settings,
// citus.shard_count=8 among them, come first, cfg.Settings after them, so
// they may override them), for a test or program that needs the
// cluster itself: to kill and restart its nodes (Cluster), to put a proxy in
// front of the coordinator. Its databases (Server.New, Server.NewDB) are
// made as EnvCitus's are. The caller must Stop it.
//
// Its nodes keep every commit they acknowledged when killed
// (synchronous_commit is on, unlike EnvCitus's cluster and the single
// test server, which nobody kills); a test that wants speed instead and
// can lose a commit says so with "synchronous_commit=off" in cfg.Settings.
func StartCitus(ctx context.Context, cfg pgserver.CitusConfig) (*Server, error) {
	cfg.Settings = append([]string{"synchronous_commit=on"}, cfg.Settings...)
	srv, err := startCitus(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Server{srv: srv}, nil
}

// startCitus starts the cluster behind StartCitus and EnvCitus.
func startCitus(ctx context.Context, cfg pgserver.CitusConfig) (_ *server, err error) {
	if cfg.Prefix == "" {
		cfg.Prefix = citusPrefix
	}
	// Eight shards per distributed table, not Citus's 32: a test database
	// creates its tables' shards on the workers, and fewer are made faster.
	cfg.Settings = append(settings([]string{"citus.shard_count=8"}), cfg.Settings...)
	c, err := pgserver.StartCitus(ctx, cfg)
	if errors.Is(err, pgserver.ErrNoServerUser) {
		return nil, fmt.Errorf("idemtest: %w; run the tests as a non-root user, create a postgres user (useradd --system postgres), or set %s", err, EnvDatabaseURL)
	}
	if err != nil {
		return nil, fmt.Errorf("idemtest: start a Citus cluster: %w", err)
	}
	srv := &server{citus: c, pg: c.Coordinator, baseURL: c.URL("postgres")}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	if srv.admin, err = openAdmin(ctx, srv.baseURL); err != nil {
		return nil, fmt.Errorf("idemtest: connect to the coordinator: %w%s", err, srv.logTail())
	}
	return srv, nil
}

// Cluster is the Citus cluster behind s, or nil when s is a single server.
func (s *Server) Cluster() *pgserver.Citus { return s.srv.citus }

// New is the package's New on s instead of the test binary's shared server:
// a fresh database for t, dropped when t ends.
func (s *Server) New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db, err := s.NewDB(ctx, t.Name(), opts...)
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

// citusDistributeLedger distributes the ledger this package created itself
// (the ledger DDL of a test without WithMigrations) by scope on a Citus
// cluster, as the migration -distributed generates does
// (create_distributed_table). It runs after the ledger DDL, before
// WithSetup's statements, which may then co-locate business tables with it
// (colocate_with => the ledger's name). A ledger the package's migrations
// made is never distributed here: the tests then run on the schema the
// migrations ship (citusPlacement).
func citusDistributeLedger(ctx context.Context, conn *pgx.Conn, table string) error {
	l, err := idem.LedgerSchema(table)
	if err != nil {
		return fmt.Errorf("ledger table: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT create_distributed_table($1, 'scope')`, l.Table.Quoted()); err != nil {
		return fmt.Errorf("distribute %s by scope: %w", l.Table.Quoted(), err)
	}
	return nil
}

// citusPlacementSQL reads, for the ledger $1, whether Citus distributes it
// and which other tables it distributes by hash (their names, sorted).
const citusPlacementSQL = `SELECT
    EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)),
    coalesce((SELECT array_agg(logicalrelid::text ORDER BY logicalrelid::text) FROM pg_dist_partition
        WHERE partmethod = 'h' AND logicalrelid IS DISTINCT FROM to_regclass($1)), '{}')`

// citusPlacement checks, on a Citus cluster, where the package's migrations
// left the ledger table. Distributed: nothing to say. Left on the
// coordinator beside tables Citus distributes: an error naming
// -distributed, since a call writing the ledger and a tenant's rows then
// commits on two nodes, never on the tenant's alone (docs/ha.md's "one
// tenant, one node" does not hold). Left on the coordinator with every
// other table: a note, since the promises hold there as on one server.
func citusPlacement(ctx context.Context, conn *pgx.Conn, table string) (note string, err error) {
	l, err := idem.LedgerSchema(table)
	if err != nil {
		return "", fmt.Errorf("ledger table: %w", err)
	}
	name := l.Table.Quoted()
	var distributed bool
	var others []string
	if err := conn.QueryRow(ctx, citusPlacementSQL, name).Scan(&distributed, &others); err != nil {
		return "", fmt.Errorf("where the migrations left %s: %w", name, err)
	}
	switch {
	case distributed:
		return "", nil
	case len(others) > 0:
		return "", fmt.Errorf("the migrations leave the ledger %s on the Citus coordinator beside the distributed tables %s: "+
			"a call that writes the ledger and a tenant's rows commits on two nodes (two-phase commit), never on the tenant's node alone; "+
			"generate the package with -distributed=citus:TABLE.COLUMN, naming the table the ledger lives beside and its distribution column "+
			"(e.g. -distributed=citus:%s.tenant_id), so that its migration distributes the ledger by scope, co-located with it (docs/ha.md)",
			name, strings.Join(others, ", "), others[0])
	}
	return fmt.Sprintf("idemtest: on this Citus cluster the migrations distribute no table: the ledger %s and every other table stay on the coordinator, "+
		"as on one server (-distributed=citus:TABLE.COLUMN distributes the ledger beside a distributed table: docs/ha.md)", name), nil
}
