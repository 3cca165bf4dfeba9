// Package scany_pool is a case of the effect corpus.
//
// Expect: refused
package scany_pool

import (
	"context"

	"github.com/georgysavva/scany/v2/pgxscan"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ pool *pgxpool.Pool }

// Create reads with pgxscan on the pool, outside its transaction.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	var n int64
	return pgxscan.Get(ctx, s.pool, &n, "SELECT count(*) FROM orders WHERE id = $1", id)
}
