package orms

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"github.com/idemgen/idemgen/example/sqlc/transfers"
)

// gormTransfer is a row of the transfers table, for GORM.
type gormTransfer struct {
	ID          int64 `gorm:"primaryKey"`
	FromAccount int64
	ToAccount   int64
	AmountCents int64
	Currency    string
	Memo        string
}

// TableName is the table gormTransfer maps to.
func (gormTransfer) TableName() string { return "transfers" }

// GormTransfers is the transfers service on GORM.
type GormTransfers struct {
	db *gorm.DB
}

// NewGormTransfers returns the service over db.
func NewGormTransfers(db *gorm.DB) *GormTransfers { return &GormTransfers{db: db} }

// Transfer is transfers.Transfers.Transfer written with GORM: every query
// runs in a session on tx.
func (s *GormTransfers) Transfer(ctx context.Context, tx *sql.Tx, req transfers.TransferRequest) (transfers.TransferReceipt, error) {
	g := s.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	g.Statement.ConnPool = tx // what gorm.DB.Begin does with the *sql.Tx it begins
	var r transfers.TransferReceipt
	res := g.Raw(`UPDATE accounts SET balance_cents = balance_cents - ?
		WHERE id = ? AND currency = ? AND balance_cents >= ? RETURNING balance_cents`,
		req.AmountCents, req.FromAccount, req.Currency, req.AmountCents).Scan(&r.FromBalanceCents)
	if res.Error == nil && res.RowsAffected == 0 {
		return r, fmt.Errorf("debit account %d: %w", req.FromAccount, transfers.ErrInsufficientFunds)
	}
	if res.Error != nil {
		return r, fmt.Errorf("debit account %d: %w", req.FromAccount, res.Error)
	}
	res = g.Raw(`UPDATE accounts SET balance_cents = balance_cents + ?
		WHERE id = ? AND currency = ? RETURNING balance_cents`,
		req.AmountCents, req.ToAccount, req.Currency).Scan(&r.ToBalanceCents)
	if res.Error == nil && res.RowsAffected == 0 {
		res.Error = sql.ErrNoRows
	}
	if res.Error != nil {
		return r, fmt.Errorf("credit account %d: %w", req.ToAccount, res.Error)
	}
	t := &gormTransfer{FromAccount: req.FromAccount, ToAccount: req.ToAccount, AmountCents: req.AmountCents, Currency: req.Currency, Memo: req.Memo}
	if err := g.Create(t).Error; err != nil {
		return r, fmt.Errorf("insert transfer: %w", err)
	}
	r.TransferID = t.ID
	return r, nil
}
