// Package zap_logger is a case of the effect corpus.
//
// Expect: accepted
package zap_logger

import (
	"context"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Svc is the service.
type Svc struct{ log *zap.Logger }

// Create logs with zap.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	s.log.Info("creating order", zap.Int64("id", id))
	zap.L().Debug("creating", zap.Int64("id", id))
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
