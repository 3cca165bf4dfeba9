// Package goroutine_pool is a case of the effect corpus.
//
// Expect: refused
package goroutine_pool

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ pool *pgxpool.Pool }

// Create writes through the pool in a goroutine.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	go func() {
		_, _ = s.pool.Exec(context.Background(), "UPDATE stats SET n = n + 1")
	}()
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
