// Package rueidis_get is a case of the effect corpus.
//
// Expect: accepted
package rueidis_get

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
)

// Svc is the service.
type Svc struct{ rc rueidis.Client }

// Create reads a cached value with rueidis (GET).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	v, err := s.rc.Do(ctx, s.rc.B().Get().Key("price").Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO orders (id, price) VALUES ($1, $2)", id, v)
	return err
}
