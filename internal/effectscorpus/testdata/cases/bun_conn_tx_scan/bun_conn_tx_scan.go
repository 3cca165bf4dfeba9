// Package bun_conn_tx_scan is a case of the effect corpus.
//
// Expect: accepted
package bun_conn_tx_scan

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun"
)

// Svc is the service.
type Svc struct{ db *bun.DB }

// Order is a bun model.
type Order struct {
	ID     int64 `bun:",pk"`
	Status string
}

// Create updates and scans with bun's NewUpdate().Conn(tx)...Returning().Scan.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	var status string
	return s.db.NewUpdate().Conn(tx).Model((*Order)(nil)).Set("status = ?", "paid").Where("id = ?", id).Returning("status").Scan(ctx, &status)
}
