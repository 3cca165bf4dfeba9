package handler

import (
	"context"
	"database/sql"

	"pay"
)

// Handle calls the bare method with the wrapper in scope: the fix calls the wrapper.
func Handle(ctx context.Context, tx *sql.Tx, svc *pay.IdempotentPayments, p *pay.Payments) {
	p.Charge(ctx, tx, 100) // want `Payments.Charge bypasses its idempotent wrapper`
	p.Payout(ctx, 100)     // want `Payments.Payout bypasses its idempotent wrapper: .* call IdempotentPayments.Payout instead`
	svc.Charge(ctx, 100)
	svc.ChargeInTx(ctx, tx, 100)
}

// Values: a method value and a method expression are reported; no fix.
func Values(svc *pay.IdempotentPayments, p *pay.Payments) {
	f := p.Charge               // want `Payments.Charge \(as a function value\) bypasses`
	g := (*pay.Payments).Payout // want `Payments.Payout \(as a function value\) bypasses`
	_, _ = f, g
}

// Two wrappers in scope: which one is meant is not mechanical, no fix.
func Two(ctx context.Context, a, b *pay.IdempotentPayments, p *pay.Payments) {
	p.Payout(ctx, 1) // want `Payments.Payout bypasses`
}

// Embedded: the promoted method is the same method.
type Embedded struct{ *pay.Payments }

// Promoted calls it through the embedding.
func Promoted(ctx context.Context, e Embedded) {
	e.Payout(ctx, 1) // want `Payments.Payout bypasses`
}

// Harm is a use meant to bypass the wrapper, said so with a reason.
func Harm(ctx context.Context, p *pay.Payments) {
	//idem:bypass-ok shows what a handler without the wrapper does
	p.Payout(ctx, 1)
	p.Payout(ctx, 2) //idem:bypass-ok same

	//idem:bypass-ok
	p.Payout(ctx, 3) // want `Payments.Payout bypasses`
}

// Only holds the only use of p: dropping it would not compile, no fix.
func Only(ctx context.Context, svc *pay.IdempotentPayments) {
	p := &pay.Payments{}
	p.Payout(ctx, 1) // want `Payments.Payout bypasses`
}

func newPayments() *pay.Payments { return &pay.Payments{} }

// Made calls a constructor the fix would drop: no fix.
func Made(ctx context.Context, svc *pay.IdempotentPayments) {
	newPayments().Payout(ctx, 1) // want `Payments.Payout bypasses`
}
