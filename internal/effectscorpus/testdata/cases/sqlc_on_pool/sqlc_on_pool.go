// Package sqlc_on_pool is a case of the effect corpus.
//
// Expect: refused
package sqlc_on_pool

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Svc is the service.
type Svc struct{ q *Queries }

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

// NewSvc builds the queries on the pool.
func NewSvc(pool *pgxpool.Pool) *Svc { return &Svc{q: New(pool)} }

// Create runs sqlc queries built on the pool (s.q) instead of q.WithTx(tx).
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	return s.q.CreateOrder(ctx, id)
}
