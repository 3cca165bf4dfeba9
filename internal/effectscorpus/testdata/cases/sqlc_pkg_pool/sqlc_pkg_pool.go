// Package sqlc_pkg_pool is a case of the effect corpus.
//
// Expect: refused
package sqlc_pkg_pool

import (
	"context"

	"github.com/idemgen/idemgen/internal/effectscorpus/testdata/cases/sqlc_pkg_pool/db"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ q *db.Queries }

// Create runs sqlc queries of another package built on the pool.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return s.q.CreateOrder(ctx, id)
}
