// Package uuid_ids is a case of the effect corpus.
//
// Expect: accepted
package uuid_ids

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create makes row ids with google/uuid.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	rowID := uuid.New()
	v7, err := uuid.NewV7()
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO orders (id, uid, v7) VALUES ($1, $2, $3)", id, rowID.String(), v7.String())
	return err
}
