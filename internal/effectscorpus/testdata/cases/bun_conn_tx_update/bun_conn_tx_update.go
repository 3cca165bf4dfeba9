// Package bun_conn_tx_update is a case of the effect corpus.
//
// Expect: accepted
package bun_conn_tx_update

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

// Create updates with bun's NewUpdate().Conn(tx), the documented way.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	o := &Order{ID: id, Status: "paid"}
	_, err := s.db.NewUpdate().Conn(tx).Model(o).WherePK().Exec(ctx)
	return err
}
