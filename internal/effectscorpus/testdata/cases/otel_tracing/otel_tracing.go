// Package otel_tracing is a case of the effect corpus.
//
// Expect: accepted
package otel_tracing

import (
	"context"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
)

// Svc is the service.
type Svc struct{}

// Create traces with OpenTelemetry.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	ctx, span := otel.Tracer("orders").Start(ctx, "create")
	defer span.End()
	span.SetAttributes(attribute.Int64("id", id))
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
