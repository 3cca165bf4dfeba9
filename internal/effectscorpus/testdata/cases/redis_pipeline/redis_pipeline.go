// Package redis_pipeline is a case of the effect corpus.
//
// Expect: refused
package redis_pipeline

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Svc is the service.
type Svc struct{ rdb *redis.Client }

// Create publishes and deletes in a go-redis pipeline.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, "cart")
		p.Publish(ctx, "orders", id)
		return nil
	})
	return err
}
