// Package bun_no_conn is a case of the effect corpus.
//
// Expect: refused
package bun_no_conn

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

// Create inserts with bun on the *bun.DB, without .Conn(tx).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := s.db.NewInsert().Model(&Order{ID: id}).Exec(ctx)
	return err
}
