package compose

import (
	"context"
	"database/sql"

	"pay"
)

// Orders wraps the payments service under its own key.
type Orders struct{ p *pay.Payments }

// Place is annotated itself: its wrapper claims the key, so the bare
// Charge inside it, in the same transaction, is covered by that claim.
//
//go:generate idemgen
func (o *Orders) Place(ctx context.Context, tx *sql.Tx, amount int64) (int64, error) { // want Place:"idemgen wrapper IdempotentOrders"
	return o.p.Charge(ctx, tx, amount)
}

// Plain is not annotated: the bare call has no key of its own.
func (o *Orders) Plain(ctx context.Context, tx *sql.Tx, amount int64) (int64, error) {
	return o.p.Charge(ctx, tx, amount) // want `Payments.Charge bypasses its idempotent wrapper`
}
