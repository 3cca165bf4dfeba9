// Package sqlx_on_db is a case of the effect corpus.
//
// Expect: refused
package sqlx_on_db

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// Svc is the service.
type Svc struct{ db *sqlx.DB }

// Create runs sqlx on its *sqlx.DB.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := s.db.NamedExecContext(ctx, "INSERT INTO orders (id) VALUES (:id)", map[string]any{"id": id})
	return err
}
