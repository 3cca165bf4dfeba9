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
