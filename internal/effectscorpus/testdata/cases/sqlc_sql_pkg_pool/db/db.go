// Package db is sqlc's generated code for database/sql.
package db

import (
	"context"
	"database/sql"
)

type DBTX interface {
	ExecContext(context.Context, string, ...interface{}) (sql.Result, error)
	QueryRowContext(context.Context, string, ...interface{}) *sql.Row
}

func New(db DBTX) *Queries { return &Queries{db: db} }

type Queries struct{ db DBTX }

func (q *Queries) WithTx(tx *sql.Tx) *Queries { return &Queries{db: tx} }

func (q *Queries) CreateOrder(ctx context.Context, id int64) error {
	_, err := q.db.ExecContext(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
