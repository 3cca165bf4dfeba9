// Package prometheus_metrics is a case of the effect corpus.
//
// Expect: accepted
package prometheus_metrics

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// Svc is the service.
type Svc struct {
	orders prometheus.Counter
	lat    prometheus.Histogram
}

// Create counts with a Prometheus counter and histogram.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	s.orders.Inc()
	s.lat.Observe(1)
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
