// Package gorm_open_on_tx is a case of the effect corpus.
//
// Expect: accepted
package gorm_open_on_tx

import (
	"context"
	"database/sql"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Svc is the service.
type Svc struct{}

// Order is a GORM model.
type Order struct {
	ID     int64
	Status string
}

// Create opens GORM on the transaction (postgres.Config{Conn: tx}).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	g, err := gorm.Open(postgres.New(postgres.Config{Conn: tx}), &gorm.Config{})
	if err != nil {
		return err
	}
	return g.WithContext(ctx).Create(&Order{ID: id, Status: "new"}).Error
}
