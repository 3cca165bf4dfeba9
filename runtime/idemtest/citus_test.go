package idemtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// TestCitusDatabase makes a test database on a Citus cluster: it is on
// every node, its ledger is distributed by scope before WithSetup's
// statements run, which co-locate a business table with it, a claim and the
// business write of an atomic call land on one worker, a ledger in a schema
// is distributed too, and Close drops the database everywhere.
func TestCitusDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv, err := StartCitus(ctx, pgserver.CitusConfig{Workers: 2})
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	c := srv.Cluster()
	require.NotNil(t, c)
	require.Len(t, c.Workers, 2)

	db, err := srv.NewDB(ctx, t.Name(), WithSetup(
		`CREATE TABLE orders (scope text NOT NULL, id bigserial, memo text NOT NULL, PRIMARY KEY (scope, id))`,
		`SELECT create_distributed_table('orders', 'scope', colocate_with => 'idempotency_keys')`,
	))
	require.NoError(t, err)
	var column string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition
WHERE logicalrelid = 'idempotency_keys'::regclass`).Scan(&column))
	assert.Equal(t, "scope", column, "the ledger's distribution column")
	var colocated bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(DISTINCT colocationid) = 1 FROM pg_dist_partition
WHERE logicalrelid IN ('idempotency_keys'::regclass, 'orders'::regclass)`).Scan(&colocated))
	assert.True(t, colocated, "orders is co-located with the ledger")
	var shards int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'idempotency_keys'::regclass`).Scan(&shards))
	assert.Equal(t, 8, shards, "citus.shard_count")

	store, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := &idem.Method[int64]{Name: "orders.Create"}
	call := func() (int64, error) {
		ctx := idem.ContextWithScope(idem.ContextWithKey(ctx, "k1"), "tenant-7")
		return idem.Atomic(ctx, store, m, []byte("fp"), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO orders (scope, memo) VALUES ($1, 'one') RETURNING id`, idem.ScopeFrom(ctx)).Scan(&id)
			return id, err
		})
	}
	first, err := call()
	require.NoError(t, err)
	again, err := call()
	require.NoError(t, err)
	assert.Equal(t, first, again, "the retry replays the first answer")
	w, err := c.WorkerFor(ctx, db.Name, "idempotency_keys", "tenant-7")
	require.NoError(t, err)
	wdb, err := pgx.Connect(ctx, w.URL(db.Name))
	require.NoError(t, err)
	var ledgerRows, orders int
	require.NoError(t, wdb.QueryRow(ctx, `SELECT
  (SELECT sum(result::int) FROM run_command_on_shards('idempotency_keys', $$SELECT count(*) FROM %s$$) r JOIN citus_shards s USING (shardid) WHERE s.nodeport = current_setting('port')::int),
  (SELECT sum(result::int) FROM run_command_on_shards('orders', $$SELECT count(*) FROM %s$$) r JOIN citus_shards s USING (shardid) WHERE s.nodeport = current_setting('port')::int)`).Scan(&ledgerRows, &orders))
	require.NoError(t, wdb.Close(ctx))
	assert.Equal(t, [2]int{1, 1}, [2]int{ledgerRows, orders}, "the claim and the order are on %s, the worker WorkerFor names", w.Name())

	other, err := srv.NewDB(ctx, t.Name(), WithTable("billing.idempotency_keys"))
	require.NoError(t, err, "a ledger in a schema of its own")
	require.NoError(t, other.Pool.QueryRow(ctx, `SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition
WHERE logicalrelid = 'billing.idempotency_keys'::regclass`).Scan(&column))
	assert.Equal(t, "scope", column, "billing.idempotency_keys's distribution column")
	require.NoError(t, other.Close())

	require.NoError(t, db.Close())
	for _, s := range c.Servers() {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		require.NoError(t, err)
		var left bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_database WHERE datname = $1`, db.Name).Scan(&left))
		require.NoError(t, conn.Close(ctx))
		assert.False(t, left, "the database is left on %s", s.Name())
	}
}

// TestCitusWorkersSetting reads EnvCitus: unset is no cluster, a count is
// the workers, anything else is refused with the variable's name.
func TestCitusWorkersSetting(t *testing.T) {
	t.Setenv(EnvCitus, "")
	n, err := citusWorkers()
	require.NoError(t, err)
	assert.Zero(t, n)
	t.Setenv(EnvCitus, "3")
	n, err = citusWorkers()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	for _, bad := range []string{"0", "-1", "on"} {
		t.Setenv(EnvCitus, bad)
		_, err = citusWorkers()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), EnvCitus)
	}
}
