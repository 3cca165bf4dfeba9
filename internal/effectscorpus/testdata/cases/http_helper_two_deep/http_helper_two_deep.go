// Package http_helper_two_deep is a case of the effect corpus.
//
// Expect: refused
package http_helper_two_deep

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ c *http.Client }

func (s *Svc) notify(ctx context.Context) error { return post(s.c, "https://hooks.example") }

func post(c *http.Client, u string) error {
	resp, err := c.Post(u, "application/json", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Create posts a webhook two helpers deep.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id); err != nil {
		return err
	}
	return s.notify(ctx)
}
