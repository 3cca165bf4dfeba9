package idem

import (
	"context"
	"database/sql"
)

// The names below are what code generated before the runtime had one set of
// entry points calls. They forward to those entry points, which take a
// *sql.Tx body themselves; run go generate to call them directly.

// InlineLookupSQL is the lookup of an inline method that takes a *sql.Tx:
// it reads the row stored under k.Scope and k.Key in tx and returns the
// response it represents and the fingerprint written with it, or an error
// wrapping sql.ErrNoRows (or pgx.ErrNoRows) when there is no such row.
//
// Deprecated: Inline and InlineInTx take any lookup of this shape; run go
// generate.
type InlineLookupSQL[R any] func(ctx context.Context, tx *sql.Tx, k InlineKey) (R, []byte, error)

// AtomicSQL is Atomic with a body on a *sql.Tx.
//
// Deprecated: call Atomic, which takes a *sql.Tx body; run go generate.
func AtomicSQL[R any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	return Atomic(ctx, s, m, fingerprint, body)
}

// AtomicSQLInTx is AtomicInTx in the caller's *sql.Tx.
//
// Deprecated: call AtomicInTx, which takes a *sql.Tx; run go generate.
func AtomicSQLInTx[R any](ctx context.Context, s *Store, tx *sql.Tx, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	return AtomicInTx(ctx, s, tx, m, fingerprint, body)
}

// InlineSQL is Inline with a body on a *sql.Tx.
//
// Deprecated: call Inline, which takes a *sql.Tx body; run go generate.
func InlineSQL[R any](ctx context.Context, s *Store, m *InlineMethod[R], fingerprint []byte, lookup InlineLookupSQL[R], body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	return Inline(ctx, s, m, fingerprint, lookup, body)
}

// InlineSQLInTx is InlineInTx in the caller's *sql.Tx.
//
// Deprecated: call InlineInTx, which takes a *sql.Tx; run go generate.
func InlineSQLInTx[R any](ctx context.Context, s *Store, tx *sql.Tx, m *InlineMethod[R], fingerprint []byte, lookup InlineLookupSQL[R], body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	return InlineInTx(ctx, s, tx, m, fingerprint, lookup, body)
}
