// Package sqlc_pkg_withtx is a case of the effect corpus.
//
// Expect: accepted
package sqlc_pkg_withtx

import (
	"context"

	"github.com/idemgen/idemgen/internal/effectscorpus/testdata/cases/sqlc_pkg_withtx/db"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ q *db.Queries }

// Create runs sqlc queries of another package rebound with WithTx(tx).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return s.q.WithTx(tx).CreateOrder(ctx, id)
}
