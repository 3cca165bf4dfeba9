// Package es_indexrequest is a case of the effect corpus.
//
// Expect: refused
package es_indexrequest

import (
	"context"
	"strings"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ es *elasticsearch.Client }

// Create indexes a document with esapi.IndexRequest.Do.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	res, err := esapi.IndexRequest{Index: "orders", Body: strings.NewReader(`{"id":1}`)}.Do(ctx, s.es)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, err = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
