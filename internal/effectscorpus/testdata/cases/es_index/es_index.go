// Package es_index is a case of the effect corpus.
//
// Expect: refused
package es_index

import (
	"context"
	"strings"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ es *elasticsearch.Client }

// Create indexes a document with go-elasticsearch (es.Index, a function-typed field).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	res, err := s.es.Index("orders", strings.NewReader(`{"id":1}`), s.es.Index.WithContext(ctx))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, err = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
