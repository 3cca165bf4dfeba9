// Package write_file is a case of the effect corpus.
//
// Expect: refused
package write_file

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create writes a receipt file.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := os.WriteFile("/var/receipts/order.txt", []byte("paid"), 0o600); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
