// Package rueidis_set is a case of the effect corpus.
//
// Expect: refused
package rueidis_set

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
)

// Svc is the service.
type Svc struct{ rc rueidis.Client }

// Create sets a key with rueidis (SET).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := s.rc.Do(ctx, s.rc.B().Set().Key("order:last").Value("1").Build()).Error(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
