package pay

import (
	"context"
	"database/sql"
)

// Payments is the service.
type Payments struct{}

// Charge is atomic.
//
//go:generate go tool idemgen -retention=48h
func (p *Payments) Charge(ctx context.Context, tx *sql.Tx, amount int64) (int64, error) { // want Charge:"idemgen wrapper IdempotentPayments"
	return amount, nil
}

// Payout is external.
//
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen@v1.2.0 -mode=external
func (p *Payments) Payout(ctx context.Context, amount int64) (int64, error) { // want Payout:"idemgen wrapper IdempotentPayments"
	return amount, nil
}

// Quote is not annotated: calling it is fine.
//
//go:generate stringer -type=Payments
func (p *Payments) Quote(ctx context.Context, amount int64) int64 { return amount }

// Service holds the wrapper beside the bare service.
type Service struct {
	w     *IdempotentPayments
	inner *Payments
}

// Double charges twice, once around the wrapper.
func (s *Service) Double(ctx context.Context, tx *sql.Tx) {
	s.inner.Charge(ctx, tx, 1) // want `Payments.Charge bypasses its idempotent wrapper: called here it has no idempotency key, no claim and no replay, so a retry runs it again; call IdempotentPayments.ChargeInTx \(same arguments, in the caller's transaction\) or IdempotentPayments.Charge instead`
	s.w.inner.Payout(ctx, 1)   // want `Payments.Payout bypasses its idempotent wrapper: .* call IdempotentPayments.Payout instead`
	s.inner.Quote(ctx, 1)
	s.w.Charge(ctx, 1)
}
