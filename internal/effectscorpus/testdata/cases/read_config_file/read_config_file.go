// Package read_config_file is a case of the effect corpus.
//
// Expect: accepted
package read_config_file

import (
	"context"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create reads a config file (os.Open, os.ReadFile, OpenFile read-only).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	f, err := os.Open("/etc/orders.conf")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.ReadAll(f); err != nil {
		return err
	}
	if _, err := os.ReadFile("/etc/orders.json"); err != nil {
		return err
	}
	g, err := os.OpenFile("/etc/orders.yaml", os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer g.Close()
	_, err = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
