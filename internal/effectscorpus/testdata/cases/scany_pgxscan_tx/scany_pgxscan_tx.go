// Package scany_pgxscan_tx is a case of the effect corpus.
//
// Expect: accepted
package scany_pgxscan_tx

import (
	"context"

	"github.com/georgysavva/scany/v2/pgxscan"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create reads with scany's pgxscan on the transaction.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	var ids []int64
	if err := pgxscan.Select(ctx, tx, &ids, "SELECT id FROM orders WHERE id > $1", id); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id+int64(len(ids)))
	return err
}
