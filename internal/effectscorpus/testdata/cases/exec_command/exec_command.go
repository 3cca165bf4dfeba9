// Package exec_command is a case of the effect corpus.
//
// Expect: refused
package exec_command

import (
	"context"
	"os/exec"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create runs a process.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if err := exec.CommandContext(ctx, "notify-send", "order").Run(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
