package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

func TestParseCitus(t *testing.T) {
	c, err := ledger.ParseCitus("citus:billing.orders.tenant_id")
	require.NoError(t, err)
	assert.Equal(t, "billing.orders", c.Colocate.String())
	assert.Equal(t, "tenant_id", c.Column)
	assert.Equal(t, "citus:billing.orders.tenant_id", c.String())

	l, err := ledger.New("idempotency_keys")
	require.NoError(t, err)
	assert.Equal(t, `SELECT create_distributed_table('"idempotency_keys"', 'scope', colocate_with => '"billing"."orders"');`, l.DistributeSQL(c))

	for _, bad := range []string{"", "citus:", "citus:orders", "citus:.x", "citus:orders.", "citus:a.b.c.d", "citus:orders.Tenant", "citus:orders.t'; drop", "cockroach:orders.tenant_id", "citus:1x.tenant_id"} {
		_, err := ledger.ParseCitus(bad)
		assert.Error(t, err, bad)
	}
}

func TestCitusCheckInline(t *testing.T) {
	orders, err := ledger.NewInline("orders")
	require.NoError(t, err)
	public, err := ledger.NewInline("public.orders")
	require.NoError(t, err)
	invoices, err := ledger.NewInline("invoices")
	require.NoError(t, err)

	byScope, err := ledger.ParseCitus("citus:orders.idempotency_scope")
	require.NoError(t, err)
	assert.NoError(t, byScope.CheckInline(orders))
	assert.NoError(t, byScope.CheckInline(public), "an unqualified name is the public schema's")
	assert.ErrorContains(t, byScope.CheckInline(invoices), "not the co-located table orders")

	byTenant, err := ledger.ParseCitus("citus:orders.tenant_id")
	require.NoError(t, err)
	assert.ErrorContains(t, byTenant.CheckInline(orders), "distributed by tenant_id, which its partial unique index (idempotency_scope, idempotency_key) does not contain")
}
