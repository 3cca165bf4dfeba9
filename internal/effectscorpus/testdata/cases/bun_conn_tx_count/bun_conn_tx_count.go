// Package bun_conn_tx_count is a case of the effect corpus.
//
// Expect: accepted
package bun_conn_tx_count

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

// Create counts with bun's NewSelect().Conn(tx).Count.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	n, err := s.db.NewSelect().Conn(tx).Model((*Order)(nil)).Where("id = ?", id).Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	_, err = s.db.NewInsert().Conn(tx).Model(&Order{ID: id}).Exec(ctx)
	return err
}
