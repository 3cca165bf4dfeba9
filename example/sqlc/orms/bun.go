package orms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/idemgen/idemgen/example/sqlc/transfers"
)

// bunTransfer is a row of the transfers table, for bun.
type bunTransfer struct {
	bun.BaseModel `bun:"table:transfers"`

	ID          int64 `bun:"id,pk,autoincrement"`
	FromAccount int64
	ToAccount   int64
	AmountCents int64
	Currency    string
	Memo        string
}

// BunTransfers is the transfers service on bun.
type BunTransfers struct {
	db *bun.DB
}

// NewBunTransfers returns the service over db.
func NewBunTransfers(db *bun.DB) *BunTransfers { return &BunTransfers{db: db} }

// Transfer is transfers.Transfers.Transfer written with bun: every query
// runs on tx (.Conn(tx)).
func (s *BunTransfers) Transfer(ctx context.Context, tx *sql.Tx, req transfers.TransferRequest) (transfers.TransferReceipt, error) {
	var r transfers.TransferReceipt
	err := s.db.NewUpdate().Conn(tx).Table("accounts").
		Set("balance_cents = balance_cents - ?", req.AmountCents).
		Where("id = ? AND currency = ? AND balance_cents >= ?", req.FromAccount, req.Currency, req.AmountCents).
		Returning("balance_cents").Scan(ctx, &r.FromBalanceCents)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("debit account %d: %w", req.FromAccount, transfers.ErrInsufficientFunds)
	}
	if err != nil {
		return r, fmt.Errorf("debit account %d: %w", req.FromAccount, err)
	}
	err = s.db.NewUpdate().Conn(tx).Table("accounts").
		Set("balance_cents = balance_cents + ?", req.AmountCents).
		Where("id = ? AND currency = ?", req.ToAccount, req.Currency).
		Returning("balance_cents").Scan(ctx, &r.ToBalanceCents)
	if err != nil {
		return r, fmt.Errorf("credit account %d: %w", req.ToAccount, err)
	}
	t := &bunTransfer{FromAccount: req.FromAccount, ToAccount: req.ToAccount, AmountCents: req.AmountCents, Currency: req.Currency, Memo: req.Memo}
	if _, err := s.db.NewInsert().Conn(tx).Model(t).Exec(ctx); err != nil {
		return r, fmt.Errorf("insert transfer: %w", err)
	}
	r.TransferID = t.ID
	return r, nil
}
