// Package bun_iconn_pool is a case of the effect corpus.
//
// Expect: refused
package bun_iconn_pool

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

func (s *Svc) mark(ctx context.Context, conn bun.IConn, id int64) error {
	_, err := s.db.NewUpdate().Conn(conn).Model(&Order{ID: id, Status: "paid"}).WherePK().Exec(ctx)
	return err
}

// Create passes the *bun.DB to a helper taking bun.IConn.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.mark(ctx, s.db, id)
}
