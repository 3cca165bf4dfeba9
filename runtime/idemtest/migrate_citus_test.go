package idemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// TestCitusMigrationsApplyGoldens applies, on a Citus cluster, the
// migrations gen/migrations plans for -distributed=citus:orders.tenant_id
// in every format, after the user's own migration that distributes orders:
// the ledger is distributed by scope, hash-partitioned and co-located with
// orders.
func TestCitusMigrationsApplyGoldens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := idemtest.StartCitus(ctx, pgserver.CitusConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Stop()) })
	const up = "CREATE TABLE orders (tenant_id text NOT NULL, id bigserial, PRIMARY KEY (tenant_id, id));\nSELECT create_distributed_table('orders', 'tenant_id');\n"
	for _, format := range migformat.Names() {
		t.Run(format, func(t *testing.T) {
			m := migrationDir(t, format, goldenDir(format, "citus"), userMigrationsOf(format, up, "DROP TABLE orders;\n"))
			require.NoError(t, m.Check())
			db := srv.New(t, idemtest.WithMigrations(m))
			assertLedger(t, db, idem.DefaultTable)
			var column, method string
			var colocated bool
			require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT column_to_column_name(l.logicalrelid, l.partkey), l.partmethod::text, l.colocationid = o.colocationid
FROM pg_dist_partition l, pg_dist_partition o
WHERE l.logicalrelid = 'idempotency_keys'::regclass AND o.logicalrelid = 'orders'::regclass`).Scan(&column, &method, &colocated))
			assert.Equal(t, "scope", column)
			assert.Equal(t, "h", method, "hash-distributed")
			assert.True(t, colocated, "co-located with orders")

		})
	}
}

// TestCitusMigrationsDecidePlacement: on a Citus cluster, the generated
// tests run on the schema the migrations ship, and New distributes nothing
// itself. Migrations that leave the ledger on the coordinator beside a
// distributed table (a package generated without -distributed) fail the
// database's creation with an error naming -distributed; migrations that
// distribute nothing leave every table on the coordinator, which New says
// in the test's log.
func TestCitusMigrationsDecidePlacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := idemtest.StartCitus(ctx, pgserver.CitusConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Stop()) })

	distributed := func(t *testing.T, db *idemtest.DB) bool {
		var yes bool
		require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'idempotency_keys'::regclass)`).Scan(&yes))
		return yes
	}
	t.Run("ledger beside a distributed table", func(t *testing.T) {
		const up = "CREATE TABLE orders (tenant_id text NOT NULL, id bigserial, PRIMARY KEY (tenant_id, id));\nSELECT create_distributed_table('orders', 'tenant_id');\n"
		m := migrationDir(t, "goose", goldenDir("goose", "fresh"), userMigrationsOf("goose", up, "DROP TABLE orders;\n"))
		_, err := srv.NewDB(t.Context(), t.Name(), idemtest.WithMigrations(m))
		require.Error(t, err, "a ledger left on the coordinator beside distributed tables")
		assert.ErrorContains(t, err, `the migrations leave the ledger "idempotency_keys" on the Citus coordinator beside the distributed tables orders`)
		assert.ErrorContains(t, err, "-distributed=citus:orders.tenant_id")
	})
	t.Run("nothing distributed", func(t *testing.T) {
		m := migrationDir(t, "goose", goldenDir("goose", "fresh"), nil)
		db := srv.New(t, idemtest.WithMigrations(m))
		assertLedger(t, db, idem.DefaultTable)
		assert.False(t, distributed(t, db), "the ledger stays where the migrations left it")
	})
	t.Run("the ledger this package creates", func(t *testing.T) {
		db := srv.New(t)
		assert.True(t, distributed(t, db), "without migrations, the ledger New creates is distributed by scope")
	})
}
