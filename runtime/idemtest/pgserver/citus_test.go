package pgserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCitus starts a coordinator and two workers, makes a database on every
// node, distributes a table by tenant and writes through the coordinator;
// then kills the worker holding one tenant's shard and the coordinator in
// turn, starts them again, and finds every row there and the cluster
// writable.
func TestCitus(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := StartCitus(ctx, CitusConfig{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close())
		for _, s := range c.Servers() {
			assert.NoDirExists(t, s.Dir())
		}
	})
	require.Len(t, c.Workers, DefaultCitusWorkers)
	assert.Equal(t, "coordinator", c.Coordinator.Name())
	assert.Equal(t, "worker2", c.Workers[1].Name())
	assert.Equal(t, c.Coordinator.URL("app"), c.URL("app"))

	require.NoError(t, c.CreateDatabase(ctx, "app"))
	conn, err := pgx.Connect(ctx, c.URL("app"))
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	assert.Equal(t, 2, query[int](t, c.URL("app"), "SELECT count(*) FROM citus_get_active_worker_nodes()"))
	for _, w := range c.Workers {
		assert.Equal(t, "citus", query[string](t, w.URL("app"), "SELECT extname::text FROM pg_extension WHERE extname = 'citus'"),
			"the extension on %s", w.Name())
	}
	for _, q := range []string{
		`CREATE TABLE accounts (tenant text NOT NULL, id int NOT NULL, PRIMARY KEY (tenant, id))`,
		`SELECT create_distributed_table('accounts', 'tenant')`,
		`INSERT INTO accounts SELECT 'tenant-' || (i % 10), i FROM generate_series(1, 100) i`,
	} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	assert.Equal(t, 2, query[int](t, c.URL("app"), "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'accounts'::regclass"),
		"the shards are spread over both workers")

	w, err := c.WorkerFor(ctx, "app", "accounts", "tenant-3")
	require.NoError(t, err)
	var onWorker int
	require.NoError(t, w.queryRowIn(ctx, "app", `SELECT count(*) FROM run_command_on_shards('accounts', $$SELECT count(*) FROM %s WHERE tenant = 'tenant-3'$$) r
JOIN citus_shards s USING (shardid) WHERE r.result::int > 0 AND s.nodeport = current_setting('port')::int`, nil, &onWorker))
	assert.Equal(t, 1, onWorker, "WorkerFor names the worker holding tenant-3's rows")

	for _, s := range c.Servers() {
		assert.Equal(t, "on", query[string](t, s.URL("postgres"), "SHOW synchronous_commit"),
			"%s acknowledges commits it would lose to a kill", s.Name())
		assert.Equal(t, "1s", query[string](t, s.URL("postgres"), "SHOW citus.recover_2pc_interval"), "on %s", s.Name())
	}
	require.NoError(t, c.Recover2PCEvery(ctx, 0), "two-phase-commit recovery switched off on the running cluster")
	for _, s := range c.Servers() {
		assert.Equal(t, "-1", query[string](t, s.URL("postgres"), "SHOW citus.recover_2pc_interval"), "on %s", s.Name())
	}
	require.NoError(t, c.Recover2PCEvery(ctx, 2*time.Second))
	assert.Equal(t, "2s", query[string](t, w.URL("postgres"), "SHOW citus.recover_2pc_interval"))

	// Each node crashed (SIGKILL to every process) in turn: the rows it
	// acknowledged survive.
	for i, s := range []*Server{w, c.Coordinator} {
		require.NoError(t, s.Kill(ctx))
		require.NoError(t, s.Start(ctx))
		require.NoError(t, c.WaitReady(ctx, "app"))
		assert.Equal(t, 100+i, query[int](t, c.URL("app"), "SELECT count(*) FROM accounts"), "after %s was killed", s.Name())
		conn, err := pgx.Connect(ctx, c.URL("app"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO accounts VALUES ('tenant-3', 1000 + $1)`, s.Port())
		require.NoError(t, err, "a write to the restarted %s's tenant", s.Name())
		require.NoError(t, conn.Close(ctx))
	}

	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.DropDatabase(ctx, "app"))
	for _, s := range c.Servers() {
		assert.False(t, query[bool](t, s.URL("postgres"), "SELECT count(*) > 0 FROM pg_database WHERE datname = 'app'"), "app left on %s", s.Name())
	}
}

// TestCitusErrorSaysHowToInstall: a server that cannot load the library, or
// a database that cannot find the extension, is reported with ErrNoCitus;
// other errors are left as they are.
func TestCitusErrorSaysHowToInstall(t *testing.T) {
	startup := errors.New(`pgserver: coordinator exited during start-up: FATAL: could not access file "citus": No such file or directory`)
	assert.ErrorIs(t, citusError(startup), ErrNoCitus)
	control := &pgconn.PgError{Code: "58P01", Message: `could not open extension control file "/usr/share/postgresql/15/extension/citus.control"`}
	assert.ErrorIs(t, citusError(control), ErrNoCitus)
	assert.ErrorIs(t, citusError(control), control)
	other := &pgconn.PgError{Code: "42P04", Message: `database "citus_template" already exists`}
	assert.NotErrorIs(t, citusError(other), ErrNoCitus)
}
