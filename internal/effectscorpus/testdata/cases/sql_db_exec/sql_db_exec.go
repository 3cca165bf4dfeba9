// Package sql_db_exec is a case of the effect corpus.
//
// Expect: refused
package sql_db_exec

import (
	"context"
	"database/sql"
)

// Svc is the service.
type Svc struct{ audit *sql.DB }

// Create writes through another *sql.DB.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := s.audit.ExecContext(ctx, "INSERT INTO audit (id) VALUES ($1)", id)
	return err
}
