// Package funcfield_constructor is a case of the effect corpus.
//
// Expect: refused
package funcfield_constructor

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct {
	notify func(ctx context.Context, id int64) error
}

// NewSvc wires the webhook sender.
func NewSvc() *Svc { return &Svc{notify: sendWebhook} }

func sendWebhook(ctx context.Context, id int64) error {
	resp, err := http.Post("https://hooks.example/orders", "application/json", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Create calls a function-typed field its constructor sets to a webhook sender.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id); err != nil {
		return err
	}
	return s.notify(ctx, id)
}
