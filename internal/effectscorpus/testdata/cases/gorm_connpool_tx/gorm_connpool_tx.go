// Package gorm_connpool_tx is a case of the effect corpus.
//
// Expect: accepted
package gorm_connpool_tx

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

// Create runs GORM with its Statement.ConnPool set to the transaction.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	g := s.db.WithContext(ctx)
	g.Statement.ConnPool = tx
	return g.Create(&Order{ID: id, Status: "new"}).Error
}
