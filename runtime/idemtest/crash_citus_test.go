package idemtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// TestChargeSurvivesWorkerCrash is docs/operations.md's crash test on a
// cluster, as a user writes it: a call acknowledged before the worker
// holding its tenant's shard is SIGKILLed replays after the worker starts
// again (synchronous_commit is on, so the acknowledged row survives).
func TestChargeSurvivesWorkerCrash(t *testing.T) {
	ctx := t.Context()
	srv, err := idemtest.StartCitus(ctx, pgserver.CitusConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	db := srv.New(t, idemtest.WithMigrations(chargeMigrations(t))) // generated with -distributed
	store, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	charge := func(ctx context.Context) (int64, error) {
		return idem.Atomic(ctx, store, chargeMethod, []byte("req"), insertOrder)
	}

	ctx = idem.ContextWithScope(idem.ContextWithKey(ctx, "k1"), "tenant-1")
	first, err := charge(ctx)
	require.NoError(t, err)

	c := srv.Cluster()
	w, err := c.WorkerFor(ctx, db.Name, "idempotency_keys", "tenant-1")
	require.NoError(t, err)
	require.NoError(t, w.Kill(ctx)) // SIGKILL: the worker holding tenant-1's shard
	require.NoError(t, w.Start(ctx))
	require.NoError(t, c.WaitReady(ctx, db.Name))

	again, err := charge(ctx) // the acknowledged call replays
	require.NoError(t, err)
	require.Equal(t, first, again)
}

// chargeMethod is the crash test's method.
var chargeMethod = &idem.Method[int64]{Name: "orders.Charge"}

// insertOrder is the crash test's body: one order for the call's tenant.
func insertOrder(ctx context.Context, tx pgx.Tx) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO orders (tenant_id) VALUES ($1) RETURNING id`, idem.ScopeFrom(ctx)).Scan(&id)
	return id, err
}

// chargeMigrations are the crash test's migrations: the user's orders
// distributed by tenant, and the ledger gen/migrations plans for
// -distributed=citus:orders.tenant_id beside them.
func chargeMigrations(t *testing.T) idemtest.Migrations {
	const up = "CREATE TABLE orders (tenant_id text NOT NULL, id bigserial, PRIMARY KEY (tenant_id, id));\nSELECT create_distributed_table('orders', 'tenant_id');\n"
	return migrationDir(t, "goose", goldenDir("goose", "citus"), userMigrationsOf("goose", up, "DROP TABLE orders;\n"))
}
