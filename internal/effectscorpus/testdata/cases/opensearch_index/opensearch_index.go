// Package opensearch_index is a case of the effect corpus.
//
// Expect: refused
package opensearch_index

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// Svc is the service.
type Svc struct{ os *opensearchapi.Client }

// Create indexes a document with opensearch-go v4.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.os.Index(ctx, opensearchapi.IndexReq{Index: "orders", Body: strings.NewReader(`{"id":1}`)}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
