// Package redis_universal_incr is a case of the effect corpus.
//
// Expect: refused
package redis_universal_incr

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb redis.UniversalClient }

// Create increments a counter through redis.UniversalClient.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.rdb.Incr(ctx, "orders").Err(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
