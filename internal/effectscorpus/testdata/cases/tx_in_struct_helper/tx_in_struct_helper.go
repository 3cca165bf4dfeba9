// Package tx_in_struct_helper is a case of the effect corpus.
//
// Expect: accepted
package tx_in_struct_helper

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

type repo struct{ tx pgx.Tx }

func (r *repo) save(ctx context.Context, id int64) error {
	_, err := r.tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}

// Create keeps its transaction in a per-call repository struct.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	r := &repo{tx: tx}
	return r.save(ctx, id)
}
