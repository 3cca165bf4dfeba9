// Package sqlc_sql_pkg_pool is a case of the effect corpus: sqlc for
// database/sql in a package of its own, its Queries built on the *sql.DB
// and not rebound to the method's transaction.
//
// Expect: refused
package sqlc_sql_pkg_pool

import (
	"context"
	"database/sql"

	"github.com/idemgen/idemgen/internal/effectscorpus/testdata/cases/sqlc_sql_pkg_pool/db"
)

// Svc is the service.
type Svc struct{ q *db.Queries }

// Create runs sqlc queries of another package on the *sql.DB they were
// built on.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.q.CreateOrder(ctx, id)
}
