// Package bun_runintx is a case of the effect corpus.
//
// Expect: refused
package bun_runintx

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun"
)

// Svc is the service.
type Svc struct{ db *bun.DB }

// Order is a bun model.
type Order struct {
	ID     int64 `bun:",pk"`
	Status string
}

// Create runs bun's RunInTx: a transaction of its own.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, btx bun.Tx) error {
		_, err := btx.NewInsert().Model(&Order{ID: id}).Exec(ctx)
		return err
	})
}
