package idem

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// TestLostInlineClaimOnAShard tells a violation of the idempotency index
// from another unique violation, on the table and on a Citus shard of it
// (whose error, passed on by the coordinator, names the shard's index in
// its message only).
func TestLostInlineClaimOnAShard(t *testing.T) {
	s, err := ledger.NewInline("orders")
	require.NoError(t, err)
	local := func(constraint, table string) error {
		return fmt.Errorf("insert order: %w", &pgconn.PgError{Code: "23505", ConstraintName: constraint, TableName: table})
	}
	shard := func(msg string) error {
		return fmt.Errorf("insert order: %w", &pgconn.PgError{Code: "23505", Message: msg, Where: "while executing command on 127.0.0.1:5433"})
	}
	assert.True(t, lostInlineClaim(s, local("orders_idempotency_key_idx", "orders")))
	assert.False(t, lostInlineClaim(s, local("orders_ref_key", "orders")))
	assert.False(t, lostInlineClaim(s, local("orders_idempotency_key_idx", "orders_archive")))
	assert.True(t, lostInlineClaim(s, shard(`duplicate key value violates unique constraint "orders_idempotency_key_idx_102008"`)))
	assert.True(t, lostInlineClaim(s, shard(`doppelter Schlüsselwert verletzt Unique-Constraint »orders_idempotency_key_idx_102008«`)))
	for _, msg := range []string{
		`duplicate key value violates unique constraint "orders_ref_key_102008"`,
		`duplicate key value violates unique constraint "big_orders_idempotency_key_idx_102008"`,
		`duplicate key value violates unique constraint "orders_idempotency_key_idx_102008x"`,
		`duplicate key value violates unique constraint "orders_idempotency_key_idx_"`,
		`duplicate key value violates unique constraint "orders_idempotency_key_idx"`,
	} {
		assert.False(t, lostInlineClaim(s, shard(msg)), msg)
	}
	assert.False(t, lostInlineClaim(s, &pgconn.PgError{Code: "23503", ConstraintName: "orders_idempotency_key_idx", TableName: "orders"}))
}

// TestNowLiteral checks the store's clock as the SQL of a statement sent
// without parameters (a shard's sweep): the test clock's instant, or now().
func TestNowLiteral(t *testing.T) {
	s := &Store{cfg: config{clock: func() time.Time { return time.Date(2026, 12, 6, 23, 0, 0, 123456000, time.FixedZone("x", 3600)) }}}
	assert.Equal(t, "'2026-12-06 22:00:00.123456+00'::timestamptz", s.nowLiteral())
	assert.Equal(t, "now()", (&Store{}).nowLiteral())
}
