// Package http_client_do is a case of the effect corpus.
//
// Expect: refused
package http_client_do

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create sends an HTTP request with http.DefaultClient.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://hooks.example/orders", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
