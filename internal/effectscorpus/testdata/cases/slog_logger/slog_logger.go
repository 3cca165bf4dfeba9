// Package slog_logger is a case of the effect corpus.
//
// Expect: accepted
package slog_logger

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ log *slog.Logger }

// Create logs with log/slog.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	s.log.InfoContext(ctx, "creating order", "id", id)
	slog.Info("created")
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
