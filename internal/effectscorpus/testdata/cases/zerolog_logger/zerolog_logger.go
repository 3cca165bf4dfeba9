// Package zerolog_logger is a case of the effect corpus.
//
// Expect: accepted
package zerolog_logger

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog/log"
)

// Svc is the service.
type Svc struct{}

// Create logs with zerolog.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	log.Info().Int64("id", id).Msg("creating order")
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
