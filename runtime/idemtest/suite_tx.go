package idemtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// txRuntime is what the atomic and inline suites need of a transaction
// kind T, so that their scenarios are written once for pgx.Tx and *sql.Tx:
// how to begin, use and end a caller's transaction on the test database,
// and the runtime functions that run a method in a transaction of that
// kind (idem.Atomic or idem.AtomicSQL, ...).
type txRuntime[R, T any] struct {
	begin    func(context.Context, *DB) (T, error)
	exec     func(context.Context, T, string) error
	commit   func(context.Context, T) error
	rollback func(context.Context, T) error

	atomic     func(context.Context, *idem.Store, *idem.Method[R], []byte, func(context.Context, T) (R, error)) (R, error)
	atomicInTx func(context.Context, *idem.Store, T, *idem.Method[R], []byte, func(context.Context, T) (R, error)) (R, error)
	inline     func(context.Context, *idem.Store, *idem.InlineMethod[R], []byte, lookupFunc[R, T], func(context.Context, T) (R, error)) (R, error)
	inlineInTx func(context.Context, *idem.Store, T, *idem.InlineMethod[R], []byte, lookupFunc[R, T], func(context.Context, T) (R, error)) (R, error)
}

// lookupFunc is an inline method's lookup in a transaction T
// (idem.InlineLookup, idem.InlineLookupSQL).
type lookupFunc[R, T any] func(context.Context, T, idem.InlineKey) (R, []byte, error)

// runtimeOf returns the txRuntime of T, failing the test if T is neither
// pgx.Tx nor *sql.Tx.
func runtimeOf[R, T any](t *testing.T) txRuntime[R, T] {
	t.Helper()
	var rt any
	switch any((*T)(nil)).(type) {
	case *pgx.Tx:
		rt = pgxRuntime[R]()
	case **sql.Tx:
		rt = sqlRuntime[R]()
	}
	r, ok := rt.(txRuntime[R, T])
	if !ok {
		t.Fatalf("idemtest: no suite for methods whose transaction is a %s: they take a pgx.Tx or a *sql.Tx", fmt.Sprintf("%T", (*T)(nil))[1:])
	}
	return r
}

// pgxRuntime is the txRuntime of pgx.Tx: transactions on db.Pool.
func pgxRuntime[R any]() txRuntime[R, pgx.Tx] {
	return txRuntime[R, pgx.Tx]{
		begin: func(ctx context.Context, db *DB) (pgx.Tx, error) { return db.Pool.Begin(ctx) },
		exec: func(ctx context.Context, tx pgx.Tx, q string) error {
			_, err := tx.Exec(ctx, q)
			return err
		},
		commit:     func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		rollback:   func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
		atomic:     idem.Atomic[R],
		atomicInTx: idem.AtomicInTx[R],
		inline: func(ctx context.Context, s *idem.Store, m *idem.InlineMethod[R], fp []byte, l lookupFunc[R, pgx.Tx], body func(context.Context, pgx.Tx) (R, error)) (R, error) {
			return idem.Inline(ctx, s, m, fp, idem.InlineLookup[R](l), body)
		},
		inlineInTx: func(ctx context.Context, s *idem.Store, tx pgx.Tx, m *idem.InlineMethod[R], fp []byte, l lookupFunc[R, pgx.Tx], body func(context.Context, pgx.Tx) (R, error)) (R, error) {
			return idem.InlineInTx(ctx, s, tx, m, fp, idem.InlineLookup[R](l), body)
		},
	}
}
