// Package sqlc_sql_pkg_withtx is a case of the effect corpus: sqlc for
// database/sql in a package of its own, rebound with WithTx(tx) (the
// shape of example/sqlc, refused once because a helper in a package the
// walk had not built yet was entered with no parameters).
//
// Expect: accepted
package sqlc_sql_pkg_withtx

import (
	"context"
	"database/sql"

	"github.com/idemgen/idemgen/internal/effectscorpus/testdata/cases/sqlc_sql_pkg_withtx/db"
)

// Svc is the service.
type Svc struct{ q *db.Queries }

// Create runs sqlc queries of another package rebound with WithTx(tx).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.q.WithTx(tx).CreateOrder(ctx, id)
}
