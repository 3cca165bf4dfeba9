// Package resty_post is a case of the effect corpus.
//
// Expect: refused
package resty_post

import (
	"context"

	"github.com/go-resty/resty/v2"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ rc *resty.Client }

// Create posts with resty.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.rc.R().SetContext(ctx).SetBody(map[string]int64{"id": id}).Post("https://hooks.example/orders"); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
