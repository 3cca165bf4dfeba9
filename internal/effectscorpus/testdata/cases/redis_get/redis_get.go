// Package redis_get is a case of the effect corpus.
//
// Expect: accepted
package redis_get

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb *redis.Client }

// Create reads a cached value with go-redis (a read is not an effect).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	v, err := s.rdb.Get(ctx, "price").Int64()
	if err != nil && err != redis.Nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO orders (id, price) VALUES ($1, $2)", id, v)
	return err
}
