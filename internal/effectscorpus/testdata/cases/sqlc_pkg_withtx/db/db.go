// Package db is sqlc-style generated code, in a package of its own.
package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is sqlc's handle: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Queries is sqlc's generated code.
type Queries struct{ db DBTX }

// New is sqlc's constructor.
func New(db DBTX) *Queries { return &Queries{db: db} }

// WithTx is sqlc's rebinding to a transaction.
func (q *Queries) WithTx(tx pgx.Tx) *Queries { return &Queries{db: tx} }

// CreateOrder is a generated query.
func (q *Queries) CreateOrder(ctx context.Context, id int64) error {
	_, err := q.db.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
