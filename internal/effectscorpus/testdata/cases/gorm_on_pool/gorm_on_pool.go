// Package gorm_on_pool is a case of the effect corpus.
//
// Expect: refused
package gorm_on_pool

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

// Create creates with GORM on its pool-backed *gorm.DB.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.db.WithContext(ctx).Create(&Order{ID: id, Status: "new"}).Error
}
