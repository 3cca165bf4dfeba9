package idem

// Which driver a call gets: the store's, chosen when it was made (pgxDriver
// by NewStore, sqlDriver by NewSQLStore); a body whose transaction type is
// not the driver's is refused before anything runs.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// driverFor returns the store's driver as the driver of TTx, refusing a
// body whose transaction the store's driver does not give. fn names the
// entry point in the error.
func driverFor[TTx any](s *Store, fn string) (driver[TTx], error) {
	if drv, ok := s.drv.(driver[TTx]); ok {
		return drv, nil
	}
	switch any((*TTx)(nil)).(type) {
	case *pgx.Tx:
		if _, ok := s.drv.(sqlDriver); ok {
			return nil, fmt.Errorf("idem: %s: the store was made by NewSQLStore over a *sql.DB, and the body takes a pgx.Tx: "+
				"give the body a *sql.Tx, or make the store with NewStore over a *pgxpool.Pool", fn)
		}
	case **sql.Tx:
		if _, ok := s.drv.(pgxDriver); ok {
			return nil, fmt.Errorf("idem: %s: the store was made by NewStore over a pgx pool, and the body takes a *sql.Tx: "+
				"make the store with NewSQLStore over a *sql.DB (stdlib.OpenDBFromPool(pool) gives one over the same pool), "+
				"or give the body a pgx.Tx", fn)
		}
	}
	return nil, fmt.Errorf("idem: %s: the body takes a %s: a method's transaction is a pgx.Tx or a *sql.Tx", fn, fmt.Sprintf("%T", (*TTx)(nil))[1:])
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
