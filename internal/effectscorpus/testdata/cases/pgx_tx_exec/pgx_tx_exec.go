// Package pgx_tx_exec is a case of the effect corpus.
//
// Expect: accepted
package pgx_tx_exec

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create writes on its own pgx.Tx.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
