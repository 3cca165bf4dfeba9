package idemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// EnvCitus names the environment variable that makes the server of a test
// binary a Citus cluster: a coordinator and as many workers as its value
// says ("2"), started by this package (the extension must be installed:
// scripts/install-citus.sh). Each test's database is then made on every
// node, the ledger is distributed by scope, and the pool connects to the
// coordinator. It is ignored when EnvDatabaseURL is set, and by Start, whose
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
func StartCitus(ctx context.Context, cfg pgserver.CitusConfig) (*Server, error) {
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
	t.Cleanup(func() {
		if err := db.close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return db
}

// citusDistributeLedger distributes the ledger table by scope on a Citus
// cluster, as the ledger's migration for a distributed database is to do
// (create_distributed_table): the tests' stand-in until the generated
// migration carries that statement. A ledger that is already distributed
// (by a migration) is left as it is. It runs after the migrations and the
// ledger DDL, before WithSetup's statements, which may then co-locate
// business tables with it (colocate_with => the ledger's name).
func citusDistributeLedger(ctx context.Context, conn *pgx.Conn, table string) error {
	l, err := idem.LedgerSchema(table)
	if err != nil {
		return fmt.Errorf("ledger table: %w", err)
	}
	name := l.Table.Quoted() // as regclass reads it
	var distributed bool
	if err := conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, name).Scan(&distributed); err != nil {
		return fmt.Errorf("is %s distributed: %w", name, err)
	}
	if distributed {
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT create_distributed_table($1, 'scope')`, name); err != nil {
		return fmt.Errorf("distribute %s by scope: %w", name, err)
	}
	return nil
}
