// Package json_encoding is a case of the effect corpus.
//
// Expect: accepted
package json_encoding

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create encodes a payload with encoding/json into a column.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	b, err := json.Marshal(map[string]int64{"id": id})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(b); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO orders (id, body) VALUES ($1, $2)", id, buf.Bytes())
	return err
}
