package idemtest

import (
	"context"
	"database/sql"

	"github.com/idemgen/idemgen/runtime/idem"
)

// AtomicSQL is the suite of an atomic method that takes a *sql.Tx
// (database/sql); its Store must build the store from db.SQL
// (idem.NewSQLStore).
type AtomicSQL[S, W, A, R any] = AtomicTx[S, W, A, R, *sql.Tx]

// InlineSQL is the suite of an inline method that takes a *sql.Tx; its
// Store must build the store from db.SQL (idem.NewSQLStore).
type InlineSQL[S, W, A, R any] = InlineTx[S, W, A, R, *sql.Tx]

// sqlRuntime is the txRuntime of *sql.Tx: transactions on db.SQL.
func sqlRuntime[R any]() txRuntime[R, *sql.Tx] {
	return txRuntime[R, *sql.Tx]{
		begin: func(ctx context.Context, db *DB) (*sql.Tx, error) { return db.SQL.BeginTx(ctx, nil) },
		exec: func(ctx context.Context, tx *sql.Tx, q string) error {
			_, err := tx.ExecContext(ctx, q)
			return err
		},
		commit:     func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		rollback:   func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
		atomic:     idem.AtomicSQL[R],
		atomicInTx: idem.AtomicSQLInTx[R],
		inline: func(ctx context.Context, s *idem.Store, m *idem.InlineMethod[R], fp []byte, l lookupFunc[R, *sql.Tx], body func(context.Context, *sql.Tx) (R, error)) (R, error) {
			return idem.InlineSQL(ctx, s, m, fp, idem.InlineLookupSQL[R](l), body)
		},
		inlineInTx: func(ctx context.Context, s *idem.Store, tx *sql.Tx, m *idem.InlineMethod[R], fp []byte, l lookupFunc[R, *sql.Tx], body func(context.Context, *sql.Tx) (R, error)) (R, error) {
			return idem.InlineSQLInTx(ctx, s, tx, m, fp, idem.InlineLookupSQL[R](l), body)
		},
	}
}
