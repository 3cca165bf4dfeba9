// Package net_dialer is a case of the effect corpus.
//
// Expect: refused
package net_dialer

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{}

// Create opens a TCP connection with a net.Dialer.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", "ledger.example:9000")
	if err != nil {
		return err
	}
	return c.Close()
}
