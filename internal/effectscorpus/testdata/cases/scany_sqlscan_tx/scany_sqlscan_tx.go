// Package scany_sqlscan_tx is a case of the effect corpus.
//
// Expect: accepted
package scany_sqlscan_tx

import (
	"context"
	"database/sql"

	"github.com/georgysavva/scany/v2/sqlscan"
)

// Svc is the service.
type Svc struct{}

// Create reads with scany's sqlscan on the transaction.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	var n int64
	return sqlscan.Get(ctx, tx, &n, "SELECT count(*) FROM orders WHERE id = $1", id)
}
