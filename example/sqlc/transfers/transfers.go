package transfers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemgen/idemgen/example/sqlc/transfers/db"
)

// Final errors: a retry with the same key gets the same error back.
var (
	// ErrInsufficientFunds is returned when the source account's balance
	// cannot cover the amount.
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrUnknownAccount is returned when either account does not exist.
	ErrUnknownAccount = errors.New("unknown account")
	// ErrCurrencyMismatch is returned when an account does not hold the
	// transfer's currency.
	ErrCurrencyMismatch = errors.New("currency mismatch")
)

// ErrInvalidRequest wraps every validation failure; it is not final, since a
// corrected request needs a new key anyway (the fingerprint differs).
var ErrInvalidRequest = errors.New("invalid request")

// Transfers is the service: it moves money between accounts with the
// queries sqlc generated (package db).
type Transfers struct {
	queries *db.Queries
}

// NewTransfers returns the service over conn, the *sql.DB its queries run on
// outside a transaction. Transfer runs on the transaction it is given.
func NewTransfers(conn *sql.DB) *Transfers {
	return &Transfers{queries: db.New(conn)}
}

// TransferRequest asks to move AmountCents of Currency from one account to
// another.
type TransferRequest struct {
	FromAccount int64  `json:"from_account"`
	ToAccount   int64  `json:"to_account"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Memo        string `json:"memo"`
}

// TransferReceipt is the result of a transfer: its id and both balances
// right after it.
type TransferReceipt struct {
	TransferID       int64 `json:"transfer_id"`
	FromBalanceCents int64 `json:"from_balance_cents"`
	ToBalanceCents   int64 `json:"to_balance_cents"`
}

// Transfer moves money between two accounts: both balances and one
// transfers row, in the transaction it is given. sqlc's Queries.WithTx runs
// the generated queries on it.
//
//go:generate go tool idemgen -retention=24h -final-errors=ErrInsufficientFunds,ErrUnknownAccount,ErrCurrencyMismatch
func (s *Transfers) Transfer(ctx context.Context, tx *sql.Tx, req TransferRequest) (TransferReceipt, error) {
	if req.AmountCents <= 0 || req.FromAccount == req.ToAccount || len(req.Currency) != 3 {
		return TransferReceipt{}, fmt.Errorf("%w: two different accounts, a positive amount_cents and a 3-letter currency are required", ErrInvalidRequest)
	}
	q := s.queries.WithTx(tx)
	accounts, err := q.LockAccounts(ctx, db.LockAccountsParams{First: req.FromAccount, Second: req.ToAccount})
	if err != nil {
		return TransferReceipt{}, fmt.Errorf("lock accounts: %w", err)
	}
	if len(accounts) != 2 {
		return TransferReceipt{}, fmt.Errorf("transfer %d -> %d: %w", req.FromAccount, req.ToAccount, ErrUnknownAccount)
	}
	for _, a := range accounts {
		if a.Currency != req.Currency {
			return TransferReceipt{}, fmt.Errorf("account %d holds %s, not %s: %w", a.ID, a.Currency, req.Currency, ErrCurrencyMismatch)
		}
		if a.ID == req.FromAccount && a.BalanceCents < req.AmountCents {
			return TransferReceipt{}, fmt.Errorf("transfer %d %s from account %d: %w", req.AmountCents, req.Currency, a.ID, ErrInsufficientFunds)
		}
	}
	var r TransferReceipt
	if r.FromBalanceCents, err = q.AddToBalance(ctx, db.AddToBalanceParams{ID: req.FromAccount, DeltaCents: -req.AmountCents}); err != nil {
		return TransferReceipt{}, fmt.Errorf("debit account %d: %w", req.FromAccount, err)
	}
	if r.ToBalanceCents, err = q.AddToBalance(ctx, db.AddToBalanceParams{ID: req.ToAccount, DeltaCents: req.AmountCents}); err != nil {
		return TransferReceipt{}, fmt.Errorf("credit account %d: %w", req.ToAccount, err)
	}
	r.TransferID, err = q.CreateTransfer(ctx, db.CreateTransferParams{
		FromAccount: req.FromAccount, ToAccount: req.ToAccount,
		AmountCents: req.AmountCents, Currency: req.Currency, Memo: req.Memo,
	})
	if err != nil {
		return TransferReceipt{}, fmt.Errorf("insert transfer: %w", err)
	}
	return r, nil
}
