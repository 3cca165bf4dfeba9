// Package sqlx_on_tx is a case of the effect corpus.
//
// Expect: accepted
package sqlx_on_tx

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// Svc is the service.
type Svc struct{ db *sqlx.DB }

// Create wraps the transaction in an *sqlx.Tx and runs sqlx on it.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	txx := &sqlx.Tx{Tx: tx, Mapper: s.db.Mapper}
	var n int
	if err := txx.GetContext(ctx, &n, "SELECT count(*) FROM orders WHERE id = $1", id); err != nil {
		return err
	}
	_, err := txx.NamedExecContext(ctx, "INSERT INTO orders (id) VALUES (:id)", map[string]any{"id": id})
	return err
}
