// Package redis_do_get is a case of the effect corpus.
//
// Expect: accepted
package redis_do_get

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb *redis.Client }

// Create reads with go-redis's generic Do("GET") and a read-only pipeline.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.rdb.Do(ctx, "GET", "price").Err(); err != nil && err != redis.Nil {
		return err
	}
	pipe := s.rdb.Pipeline()
	get := pipe.Get(ctx, "stock")
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id, stock) VALUES ($1, $2)", id, get.Val())
	return err
}
