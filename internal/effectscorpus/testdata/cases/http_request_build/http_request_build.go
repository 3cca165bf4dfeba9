// Package http_request_build is a case of the effect corpus.
//
// Expect: accepted
package http_request_build

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create builds an HTTP request (stored for an outbox), never sends it.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	u := url.URL{Scheme: "https", Host: "bank.example", Path: "/charges"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", "order-1")
	dump, err := httputil.DumpRequestOut(req, true)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO outbox (id, request) VALUES ($1, $2)", id, dump)
	return err
}
