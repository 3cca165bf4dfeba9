package example

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// DepositRequest records AmountCents paid in at a counter for an account.
type DepositRequest struct {
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
}

// DepositReceipt is the payment row a deposit wrote.
type DepositReceipt struct {
	PaymentID   int64  `json:"payment_id"`
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
}

// Deposit records a cash deposit: one payments row carrying its idempotency
// key (inline mode, payments.idempotency_key), and the merchant's balance
// credited, in the transaction it is given. There is no ledger row: the
// payment row is the record of the request.
//
//go:generate go tool idemgen -inline=payments -lookup=DepositByKey -retention=48h
func (p *Payments) Deposit(ctx context.Context, tx pgx.Tx, req DepositRequest) (DepositReceipt, error) {
	if req.AmountCents <= 0 || req.Account == "" || len(req.Currency) != 3 {
		return DepositReceipt{}, fmt.Errorf("%w: account, a positive amount_cents and a 3-letter currency are required", ErrInvalidRequest)
	}
	k, ok := idem.InlineKeyFrom(ctx)
	if !ok {
		return DepositReceipt{}, fmt.Errorf("deposit: no idempotency key in the context: call it through IdempotentPayments")
	}
	r := DepositReceipt{Account: req.Account, AmountCents: req.AmountCents, Currency: req.Currency, Description: req.Description}
	err := tx.QueryRow(ctx, `INSERT INTO payments (account, amount_cents, currency, card_last4, description,
		idempotency_scope, idempotency_key, idempotency_fingerprint)
		VALUES ($1, $2, $3, 'cash', $4, $5, $6, $7) RETURNING id`,
		req.Account, req.AmountCents, req.Currency, req.Description, k.Scope, k.Key, k.Fingerprint).Scan(&r.PaymentID)
	if err != nil {
		return DepositReceipt{}, fmt.Errorf("insert payment: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO balances (account, balance_cents) VALUES ($1, $2)
		ON CONFLICT (account) DO UPDATE SET balance_cents = balances.balance_cents + excluded.balance_cents`,
		req.Account, req.AmountCents)
	if err != nil {
		return DepositReceipt{}, fmt.Errorf("credit balance: %w", err)
	}
	return r, nil
}

// DepositByKey returns the deposit stored under the key, with the request
// fingerprint written with it: what a retry of Deposit replays.
func (p *Payments) DepositByKey(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (DepositReceipt, []byte, error) {
	var r DepositReceipt
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id, account, amount_cents, currency, description, idempotency_fingerprint
		FROM payments WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).
		Scan(&r.PaymentID, &r.Account, &r.AmountCents, &r.Currency, &r.Description, &fp)
	if err != nil {
		return DepositReceipt{}, nil, fmt.Errorf("read deposit: %w", err)
	}
	return r, fp, nil
}
