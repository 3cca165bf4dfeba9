// Package memcache_set is a case of the effect corpus.
//
// Expect: refused
package memcache_set

import (
	"context"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ mc *memcache.Client }

// Create sets a memcache item.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.mc.Set(&memcache.Item{Key: "order", Value: []byte("1")}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
