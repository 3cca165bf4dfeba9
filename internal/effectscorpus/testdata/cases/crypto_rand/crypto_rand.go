// Package crypto_rand is a case of the effect corpus.
//
// Expect: accepted
package crypto_rand

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create draws a token with crypto/rand.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id, token) VALUES ($1, $2)", id, hex.EncodeToString(b)+rand.Text())
	return err
}
