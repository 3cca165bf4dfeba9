// Package sqlc_helper_tx is a case of the effect corpus.
//
// Expect: accepted
package sqlc_helper_tx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ pool *pgxpool.Pool }

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

func create(ctx context.Context, db DBTX, id int64) error {
	return New(db).CreateOrder(ctx, id)
}

// Create passes its transaction to a helper taking sqlc's DBTX.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return create(ctx, tx, id)
}
