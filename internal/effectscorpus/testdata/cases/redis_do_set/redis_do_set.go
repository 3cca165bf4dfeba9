// Package redis_do_set is a case of the effect corpus.
//
// Expect: refused
package redis_do_set

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb *redis.Client }

// Create writes with go-redis's generic Do("SET").
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.rdb.Do(ctx, "SET", "order:last", id).Err(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
