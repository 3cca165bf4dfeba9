// Package funcfield_pure is a case of the effect corpus.
//
// Expect: accepted
package funcfield_pure

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ format func(int64) string }

// NewSvc sets the formatter.
func NewSvc() *Svc { return &Svc{format: ref} }

func ref(id int64) string { return "order-" + strconv.FormatInt(id, 10) }

// Create calls a function-typed field its constructor sets to a pure function.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	_, err := tx.Exec(ctx, "INSERT INTO orders (id, ref) VALUES ($1, $2)", id, s.format(id))
	return err
}
