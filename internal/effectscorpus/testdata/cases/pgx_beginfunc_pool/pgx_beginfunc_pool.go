// Package pgx_beginfunc_pool is a case of the effect corpus.
//
// Expect: refused
package pgx_beginfunc_pool

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ pool *pgxpool.Pool }

// Create runs a transaction of its own on the pool.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(t pgx.Tx) error {
		_, err := t.Exec(ctx, "UPDATE stats SET n = n + 1")
		return err
	})
}
