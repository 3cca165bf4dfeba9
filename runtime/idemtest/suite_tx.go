package idemtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// callerTx is how the atomic and inline suites begin, use and end a
// caller's transaction of kind T on the test database, for the scenarios
// that run a method inside one (idem.AtomicInTx, idem.InlineInTx). The
// runtime's entry points take either kind themselves.
type callerTx[T any] struct {
	begin    func(context.Context, *DB) (T, error)
	exec     func(context.Context, T, string) error
	commit   func(context.Context, T) error
	rollback func(context.Context, T) error
}

// lookupFunc is an inline method's lookup in a transaction T.
type lookupFunc[R, T any] func(context.Context, T, idem.InlineKey) (R, []byte, error)

// callerTxOf returns the callerTx of T, failing the test if T is neither
// pgx.Tx nor *sql.Tx.
func callerTxOf[T any](t *testing.T) callerTx[T] {
	t.Helper()
	var ct any
	switch any((*T)(nil)).(type) {
	case *pgx.Tx:
		ct = callerTx[pgx.Tx]{
			begin: func(ctx context.Context, db *DB) (pgx.Tx, error) { return db.Pool.Begin(ctx) },
			exec: func(ctx context.Context, tx pgx.Tx, q string) error {
				_, err := tx.Exec(ctx, q)
				return err
			},
			commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
			rollback: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
		}
	case **sql.Tx:
		ct = callerTx[*sql.Tx]{
			begin: func(ctx context.Context, db *DB) (*sql.Tx, error) { return db.SQL.BeginTx(ctx, nil) },
			exec: func(ctx context.Context, tx *sql.Tx, q string) error {
				_, err := tx.ExecContext(ctx, q)
				return err
			},
			commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
			rollback: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
		}
	}
	c, ok := ct.(callerTx[T])
	if !ok {
		t.Fatalf("idemtest: no suite for methods whose transaction is a %s: they take a pgx.Tx or a *sql.Tx", fmt.Sprintf("%T", (*T)(nil))[1:])
	}
	return c
}
