package idem

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A driver is how the protocol reaches PostgreSQL through one kind of
// database handle. TTx is the transaction a method's body takes: pgx.Tx
// (pgxDriver, pgxdriver.go: a store made by NewStore) or *sql.Tx
// (sqlDriver, sqldriver.go: a store made by NewSQLStore). The entry points
// (Atomic, AtomicInTx, Inline, InlineInTx) are written once over it: the
// type of the body picks the driver, and the driver only says how the
// ledger's statements travel (pipelined with BEGIN and COMMIT, or one at a
// time) and what transaction the body gets.
type driver[TTx any] interface {
	// attempt opens an attempt's own transaction on one of the store's
	// connections: the protocol's statements travel on t; tx is the
	// transaction the body gets, valid once the claim has begun it; and
	// bodyEnded reports a body that committed or rolled back tx itself
	// where the driver can see it.
	attempt(ctx context.Context, s *Store, c call) (t attemptTx, tx func() TTx, bodyEnded func() bool, err error)
	// inTx carries the protocol's statements under a savepoint in the
	// caller's transaction tx.
	inTx(tx TTx) ledgerTx
}

// driverFor returns the driver of TTx for s, refusing a store made over
// the other kind of handle. fn names the entry point in the error.
func driverFor[TTx any](s *Store, fn string) (driver[TTx], error) {
	var d any
	switch any((*TTx)(nil)).(type) {
	case *pgx.Tx:
		if s.db != nil {
			return nil, fmt.Errorf("idem: %s: the store was made by NewSQLStore over a *sql.DB, and the body takes a pgx.Tx: "+
				"give the body a *sql.Tx, or make the store with NewStore over a *pgxpool.Pool", fn)
		}
		d = pgxDriver{}
	case **sql.Tx:
		if s.db == nil {
			return nil, fmt.Errorf("idem: %s: the store was made by NewStore over a pgx pool, and the body takes a *sql.Tx: "+
				"make the store with NewSQLStore over a *sql.DB (stdlib.OpenDBFromPool(pool) gives one over the same pool), "+
				"or give the body a pgx.Tx", fn)
		}
		d = sqlDriver{}
	}
	drv, ok := d.(driver[TTx])
	if !ok {
		return nil, fmt.Errorf("idem: %s: the body takes a %s: a method's transaction is a pgx.Tx or a *sql.Tx", fn, fmt.Sprintf("%T", (*TTx)(nil))[1:])
	}
	return drv, nil
}

// inlineAttempt is one attempt of Inline on d's transaction. Inline mode's
// statements ride along the body's own (pgx queues them behind the body's
// first statement and watches its errors; database/sql sees only the error
// the body returns), so each driver has its own attempt: inlinePgxAttempt
// (inlinepgx.go) and inlineSQLAttempt (inlinesql.go). Both settle a refused
// claim through inlineSettle.
func inlineAttempt[R, TTx any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call,
	lookup func(context.Context, TTx, InlineKey) (R, []byte, error), body func(context.Context, TTx) (R, error)) (R, error) {
	switch b := any(body).(type) {
	case func(context.Context, pgx.Tx) (R, error):
		l := any(lookup).(func(context.Context, pgx.Tx, InlineKey) (R, []byte, error))
		return inlinePgxAttempt(ctx, s, m, q, c, l, b)
	case func(context.Context, *sql.Tx) (R, error):
		l := any(lookup).(func(context.Context, *sql.Tx, InlineKey) (R, []byte, error))
		return inlineSQLAttempt(ctx, s, m, q, c, l, b)
	}
	var zero R
	return zero, fmt.Errorf("idem: %s: internal error: no inline driver for %T", c.method, body)
}

// inlineInTx is InlineInTx on the caller's transaction tx, per driver:
// inlinePgxInTx (inlinepgx.go) and inlineSQLInTx (inlinesql.go).
func inlineInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *InlineMethod[R], fingerprint []byte, q *inlineQueries, c call,
	lookup func(context.Context, TTx, InlineKey) (R, []byte, error), body func(context.Context, TTx) (R, error)) (R, error) {
	switch b := any(body).(type) {
	case func(context.Context, pgx.Tx) (R, error):
		l := any(lookup).(func(context.Context, pgx.Tx, InlineKey) (R, []byte, error))
		ptx, _ := any(tx).(pgx.Tx) // nil stays nil
		return inlinePgxInTx(ctx, s, ptx, m, fingerprint, q, c, l, b)
	case func(context.Context, *sql.Tx) (R, error):
		l := any(lookup).(func(context.Context, *sql.Tx, InlineKey) (R, []byte, error))
		stx, _ := any(tx).(*sql.Tx)
		return inlineSQLInTx(ctx, s, stx, m, fingerprint, q, c, l, b)
	}
	var zero R
	return zero, fmt.Errorf("idem: %s: internal error: no inline driver for %T", c.method, body)
}
