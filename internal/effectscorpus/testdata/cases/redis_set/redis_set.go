// Package redis_set is a case of the effect corpus.
//
// Expect: refused
package redis_set

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb *redis.Client }

// Create sets a key with go-redis v9.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.rdb.Set(ctx, "order:last", id, time.Hour).Err(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
