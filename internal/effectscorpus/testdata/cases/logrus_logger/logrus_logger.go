// Package logrus_logger is a case of the effect corpus.
//
// Expect: accepted
package logrus_logger

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/sirupsen/logrus"
)

// Svc is the service.
type Svc struct{}

// Create logs with logrus.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	logrus.WithField("id", id).Info("creating order")
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
