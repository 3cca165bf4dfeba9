// Package squirrel_runwith_db is a case of the effect corpus.
//
// Expect: refused
package squirrel_runwith_db

import (
	"context"
	"database/sql"

	sq "github.com/Masterminds/squirrel"
)

// Svc is the service.
type Svc struct{ sb sq.StatementBuilderType }

// NewSvc builds the statement builder on the database.
func NewSvc(db *sql.DB) *Svc {
	return &Svc{sb: sq.StatementBuilder.PlaceholderFormat(sq.Dollar).RunWith(db)}
}

// Create runs a squirrel builder whose runner is the *sql.DB (a field).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := s.sb.Update("orders").Set("status", "paid").Where(sq.Eq{"id": id}).ExecContext(ctx)
	return err
}
