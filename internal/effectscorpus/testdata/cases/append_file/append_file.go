// Package append_file is a case of the effect corpus.
//
// Expect: refused
package append_file

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create appends to a ledger file opened with O_APPEND.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	f, err := os.OpenFile("/var/ledger.log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
