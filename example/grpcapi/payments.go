package grpcapi

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/runtime/idem"
)

// The service's final errors, which the wrappers store and replay: the
// example's own, so errors.Is matches them either way.
var (
	// ErrCardDeclined is example.ErrCardDeclined.
	ErrCardDeclined = example.ErrCardDeclined
	// ErrInsufficientFunds is example.ErrInsufficientFunds.
	ErrInsufficientFunds = example.ErrInsufficientFunds
	// ErrAlreadyRefunded is example.ErrAlreadyRefunded.
	ErrAlreadyRefunded = example.ErrAlreadyRefunded
)

// Payments is the payments service on the messages of its proto: each
// method takes the request message and returns the response message, and
// is annotated as it is, so its fingerprint is the message's fields by
// number and a replay is proto.Equal to the first answer. The work is the
// example's (package example), run in the transaction or the external-mode
// call the wrapper gives; the caller's account is the scope the
// interceptors put in the context.
type Payments struct {
	inner   *example.Payments
	account func(context.Context) string // the caller's account: idem.ScopeFrom
}

// NewPayments returns the service over the example's payments. Wrap it
// with NewIdempotentPayments.
func NewPayments(inner *example.Payments) *Payments {
	return &Payments{inner: inner, account: idem.ScopeFrom}
}

// Charge moves amount_cents from a card to the caller's balance.
//
//go:generate go tool idemgen -retention=48h -migrations=../migrations -final-errors=ErrCardDeclined,ErrInsufficientFunds
func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req *paymentsv1.ChargeRequest) (*paymentsv1.Receipt, error) {
	card := req.GetCard()
	r, err := p.inner.Charge(ctx, tx, example.ChargeRequest{
		Account: p.account(ctx), AmountCents: req.GetAmountCents(), Currency: req.GetCurrency(),
		Card:        example.Card{Number: card.GetNumber(), ExpMonth: int(card.GetExpMonth()), ExpYear: int(card.GetExpYear())},
		Description: req.GetDescription(), Metadata: req.GetMetadata(),
	})
	if err != nil {
		return nil, err
	}
	return &paymentsv1.Receipt{PaymentId: r.PaymentID, Account: r.Account, AmountCents: r.AmountCents, Currency: r.Currency,
		CardLast4: r.CardLast4, BalanceCents: r.BalanceCents, LedgerEntryIds: r.LedgerEntryIDs}, nil
}

// Refund gives part or all of a payment back.
//
//go:generate go tool idemgen -retention=48h -migrations=../migrations -final-errors=ErrAlreadyRefunded,ErrInsufficientFunds
func (p *Payments) Refund(ctx context.Context, tx pgx.Tx, req *paymentsv1.RefundRequest) (*paymentsv1.RefundReceipt, error) {
	r, err := p.inner.Refund(ctx, tx, example.RefundRequest{Account: p.account(ctx), PaymentID: req.GetPaymentId(),
		AmountCents: req.GetAmountCents(), Reason: req.GetReason()})
	if err != nil {
		return nil, err
	}
	return &paymentsv1.RefundReceipt{RefundId: r.RefundID, PaymentId: r.PaymentID, AmountCents: r.AmountCents,
		RefundedCents: r.RefundedCents, BalanceCents: r.BalanceCents}, nil
}

// Payout sends part of the caller's balance to their bank, in external
// mode: the example's steps (reserve, transfer, mark paid) are recorded on
// this call's ledger row.
//
//go:generate go tool idemgen -retention=48h -migrations=../migrations -lock-timeout=30s -final-errors=ErrInsufficientFunds
func (p *Payments) Payout(ctx context.Context, req *paymentsv1.PayoutRequest) (*paymentsv1.PayoutReceipt, error) {
	r, err := p.inner.Payout(ctx, example.PayoutRequest{Account: p.account(ctx), AmountCents: req.GetAmountCents()})
	if err != nil {
		return nil, err
	}
	return &paymentsv1.PayoutReceipt{PayoutId: r.PayoutID, Account: r.Account, AmountCents: r.AmountCents,
		BankRef: r.BankRef, BalanceCents: r.BalanceCents}, nil
}
