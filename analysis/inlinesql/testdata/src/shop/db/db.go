// Package db is what sqlc generates: a constant per query, a method running it.
package db

import (
	"context"
	"database/sql"
)

type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type Queries struct{ db DBTX }

func New(db DBTX) *Queries { return &Queries{db: db} }

const createOrder = `-- name: CreateOrder :one
INSERT INTO orders (customer, amount_cents) VALUES ($1, $2) RETURNING id
`

func (q *Queries) CreateOrder(ctx context.Context, customer string, amount int64) (int64, error) { // want CreateOrder:"1 SQL statements"
	var id int64
	err := q.db.QueryRowContext(ctx, createOrder, customer, amount).Scan(&id)
	return id, err
}

const createKeyedOrder = `-- name: CreateKeyedOrder :one
INSERT INTO orders (customer, amount_cents, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4, $5) RETURNING id
`

func (q *Queries) CreateKeyedOrder(ctx context.Context, customer string, amount int64, scope, key string, fp []byte) (int64, error) { // want CreateKeyedOrder:"1 SQL statements"
	var id int64
	err := q.db.QueryRowContext(ctx, createKeyedOrder, customer, amount, scope, key, fp).Scan(&id)
	return id, err
}
