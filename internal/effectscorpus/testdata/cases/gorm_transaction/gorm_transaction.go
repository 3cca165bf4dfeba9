// Package gorm_transaction is a case of the effect corpus.
//
// Expect: refused
package gorm_transaction

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
)

// Svc is the service.
type Svc struct{ db *gorm.DB }

// Order is a GORM model.
type Order struct {
	ID     int64
	Status string
}

// Create runs GORM's Transaction: a transaction of its own.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		return g.Create(&Order{ID: id}).Error
	})
}
