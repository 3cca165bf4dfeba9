package example

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Final errors: a retry with the same key gets the same error back.
var (
	// ErrCardDeclined is returned when the card network declines the card.
	ErrCardDeclined = errors.New("card declined")
	// ErrInsufficientFunds is returned when the card, or for a payout the
	// merchant's balance, cannot cover the amount.
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrAlreadyRefunded is returned when a refund would take more back than
	// what is left of the payment.
	ErrAlreadyRefunded = errors.New("payment already refunded")
)

// ErrNotFound is returned for a payment that does not exist or belongs to
// another account: the two are one answer, so a caller cannot probe other
// accounts' payment ids.
var ErrNotFound = errors.New("not found")

// ErrInvalidRequest wraps every validation failure; it is not final, since a
// corrected request needs a new key anyway (the fingerprint differs).
var ErrInvalidRequest = errors.New("invalid request")

// Payments is the payments service.
type Payments struct {
	db   *pgxpool.Pool
	bank *Bank
}

// NewPayments returns the service over db, paying out through bank.
func NewPayments(db *pgxpool.Pool, bank *Bank) *Payments {
	return &Payments{db: db, bank: bank}
}

// Card is the payment instrument of a charge. The test numbers follow the
// usual conventions: ending in 0002 is declined, ending in 9995 has
// insufficient funds, anything else is approved.
type Card struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
}

// ChargeRequest asks to move AmountCents from a card to a merchant account.
type ChargeRequest struct {
	Account     string            `json:"account"`
	AmountCents int64             `json:"amount_cents"`
	Currency    string            `json:"currency"`
	Card        Card              `json:"card"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// TraceID is for logs only: two retries with different trace IDs are
	// the same request, so it is left out of the fingerprint.
	TraceID string `json:"trace_id,omitempty" idem:"-"`
}

// Receipt is the result of a charge.
type Receipt struct {
	PaymentID      int64   `json:"payment_id"`
	Account        string  `json:"account"`
	AmountCents    int64   `json:"amount_cents"`
	Currency       string  `json:"currency"`
	CardLast4      string  `json:"card_last4"`
	BalanceCents   int64   `json:"balance_cents"`
	LedgerEntryIDs []int64 `json:"ledger_entry_ids"`
}

// Charge moves money from a card to the merchant's balance: one payment, two
// ledger entries and the new balance, in the transaction it is given.
//
//go:generate go tool idemgen -retention=48h -final-errors=ErrCardDeclined,ErrInsufficientFunds
func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest) (Receipt, error) {
	if req.AmountCents <= 0 || req.Account == "" || len(req.Currency) != 3 || len(req.Card.Number) < 4 {
		return Receipt{}, fmt.Errorf("%w: account, a positive amount_cents, a 3-letter currency and a card number are required", ErrInvalidRequest)
	}
	switch {
	case strings.HasSuffix(req.Card.Number, "0002"):
		return Receipt{}, fmt.Errorf("charge %d %s: %w", req.AmountCents, req.Currency, ErrCardDeclined)
	case strings.HasSuffix(req.Card.Number, "9995"):
		return Receipt{}, fmt.Errorf("charge %d %s: %w", req.AmountCents, req.Currency, ErrInsufficientFunds)
	}
	r := Receipt{Account: req.Account, AmountCents: req.AmountCents, Currency: req.Currency,
		CardLast4: req.Card.Number[len(req.Card.Number)-4:]}
	err := tx.QueryRow(ctx, `INSERT INTO payments (account, amount_cents, currency, card_last4, description)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		req.Account, req.AmountCents, req.Currency, r.CardLast4, req.Description).Scan(&r.PaymentID)
	if err != nil {
		return Receipt{}, fmt.Errorf("insert payment: %w", err)
	}
	rows, err := tx.Query(ctx, `INSERT INTO ledger_entries (payment_id, account, amount_cents, kind)
		VALUES ($1, 'card:' || $2, -$3::bigint, 'card_debit'), ($1, $4, $3::bigint, 'merchant_credit') RETURNING id`,
		r.PaymentID, r.CardLast4, req.AmountCents, req.Account)
	if err != nil {
		return Receipt{}, fmt.Errorf("insert ledger entries: %w", err)
	}
	r.LedgerEntryIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return Receipt{}, fmt.Errorf("insert ledger entries: %w", err)
	}
	err = tx.QueryRow(ctx, `INSERT INTO balances (account, balance_cents) VALUES ($1, $2)
		ON CONFLICT (account) DO UPDATE SET balance_cents = balances.balance_cents + excluded.balance_cents
		RETURNING balance_cents`, req.Account, req.AmountCents).Scan(&r.BalanceCents)
	if err != nil {
		return Receipt{}, fmt.Errorf("credit balance: %w", err)
	}
	return r, nil
}

// RefundRequest asks to give back AmountCents of a payment; a payment may
// be refunded in several parts, up to its amount.
type RefundRequest struct {
	// Account is the caller's account, which must own the payment. It comes
	// from authentication (the API sets it), never from the request body.
	Account     string `json:"-"`
	PaymentID   int64  `json:"payment_id"`
	AmountCents int64  `json:"amount_cents"`
	Reason      string `json:"reason"`
}

// RefundReceipt is the result of a refund.
type RefundReceipt struct {
	RefundID      int64 `json:"refund_id"`
	PaymentID     int64 `json:"payment_id"`
	AmountCents   int64 `json:"amount_cents"`
	RefundedCents int64 `json:"refunded_cents"` // refunded so far, this refund included
	BalanceCents  int64 `json:"balance_cents"`
}

// Refund gives part or all of a payment back to the card and takes it from
// the merchant's balance.
//
//go:generate go tool idemgen -retention=48h -final-errors=ErrAlreadyRefunded,ErrInsufficientFunds
func (p *Payments) Refund(ctx context.Context, tx pgx.Tx, req RefundRequest) (RefundReceipt, error) {
	if req.AmountCents <= 0 || req.Account == "" {
		return RefundReceipt{}, fmt.Errorf("%w: account and a positive amount_cents are required", ErrInvalidRequest)
	}
	r := RefundReceipt{PaymentID: req.PaymentID, AmountCents: req.AmountCents}
	var account string
	var amount int64
	err := tx.QueryRow(ctx, `SELECT account, amount_cents, refunded_cents FROM payments WHERE id = $1 AND account = $2 FOR UPDATE`,
		req.PaymentID, req.Account).Scan(&account, &amount, &r.RefundedCents)
	if errors.Is(err, pgx.ErrNoRows) {
		return RefundReceipt{}, fmt.Errorf("payment %d: %w", req.PaymentID, ErrNotFound)
	}
	if err != nil {
		return RefundReceipt{}, fmt.Errorf("read payment: %w", err)
	}
	if r.RefundedCents+req.AmountCents > amount {
		return RefundReceipt{}, fmt.Errorf("refund %d of payment %d (%d of %d refunded): %w",
			req.AmountCents, req.PaymentID, r.RefundedCents, amount, ErrAlreadyRefunded)
	}
	err = tx.QueryRow(ctx, `UPDATE balances SET balance_cents = balance_cents - $2
		WHERE account = $1 AND balance_cents >= $2 RETURNING balance_cents`, account, req.AmountCents).Scan(&r.BalanceCents)
	if errors.Is(err, pgx.ErrNoRows) {
		return RefundReceipt{}, fmt.Errorf("refund payment %d: %w", req.PaymentID, ErrInsufficientFunds)
	}
	if err != nil {
		return RefundReceipt{}, fmt.Errorf("debit balance: %w", err)
	}
	err = tx.QueryRow(ctx, `UPDATE payments SET refunded_cents = refunded_cents + $2 WHERE id = $1 AND account = $3 RETURNING refunded_cents`,
		req.PaymentID, req.AmountCents, req.Account).Scan(&r.RefundedCents)
	if err != nil {
		return RefundReceipt{}, fmt.Errorf("mark refunded: %w", err)
	}
	err = tx.QueryRow(ctx, `INSERT INTO refunds (payment_id, amount_cents, reason) VALUES ($1, $2, $3) RETURNING id`,
		req.PaymentID, req.AmountCents, req.Reason).Scan(&r.RefundID)
	if err != nil {
		return RefundReceipt{}, fmt.Errorf("insert refund: %w", err)
	}
	return r, nil
}
