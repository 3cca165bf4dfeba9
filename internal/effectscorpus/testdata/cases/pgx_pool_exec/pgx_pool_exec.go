// Package pgx_pool_exec is a case of the effect corpus.
//
// Expect: refused
package pgx_pool_exec

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ pool *pgxpool.Pool }

// Create writes through the pool, outside its transaction.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	_, err := s.pool.Exec(ctx, "UPDATE stats SET n = n + 1")
	return err
}
