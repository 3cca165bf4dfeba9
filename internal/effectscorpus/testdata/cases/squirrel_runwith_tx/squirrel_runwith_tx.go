// Package squirrel_runwith_tx is a case of the effect corpus.
//
// Expect: accepted
package squirrel_runwith_tx

import (
	"context"
	"database/sql"

	sq "github.com/Masterminds/squirrel"
)

// Svc is the service.
type Svc struct{}

// Create builds with squirrel and runs it on the transaction (RunWith(tx)).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := sq.Insert("orders").Columns("id").Values(id).PlaceholderFormat(sq.Dollar).RunWith(tx).ExecContext(ctx)
	return err
}
