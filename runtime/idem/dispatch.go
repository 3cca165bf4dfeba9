package idem

// Which driver a call gets: the transaction type of its body decides, and
// a store made over the other kind of handle is refused before anything
// runs.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

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
func inlineInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *InlineMethod[R], q *inlineQueries, c call,
	lookup func(context.Context, TTx, InlineKey) (R, []byte, error), body func(context.Context, TTx) (R, error)) (R, error) {
	switch b := any(body).(type) {
	case func(context.Context, pgx.Tx) (R, error):
		l := any(lookup).(func(context.Context, pgx.Tx, InlineKey) (R, []byte, error))
		ptx, _ := any(tx).(pgx.Tx) // nil stays nil
		return inlinePgxInTx(ctx, s, ptx, m, q, c, l, b)
	case func(context.Context, *sql.Tx) (R, error):
		l := any(lookup).(func(context.Context, *sql.Tx, InlineKey) (R, []byte, error))
		stx, _ := any(tx).(*sql.Tx)
		return inlineSQLInTx(ctx, s, stx, m, q, c, l, b)
	}
	var zero R
	return zero, fmt.Errorf("idem: %s: internal error: no inline driver for %T", c.method, body)
}
