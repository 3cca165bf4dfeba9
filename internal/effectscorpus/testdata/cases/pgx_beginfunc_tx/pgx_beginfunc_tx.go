// Package pgx_beginfunc_tx is a case of the effect corpus.
//
// Expect: accepted
package pgx_beginfunc_tx

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create opens a savepoint in its transaction with pgx.BeginFunc.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		_, err := sp.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
		return err
	})
}
