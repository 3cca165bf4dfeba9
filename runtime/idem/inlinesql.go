package idem

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
)

// inlineSQLAttempt is one attempt of Inline on the database/sql driver.
func inlineSQLAttempt[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, lookup func(context.Context, *sql.Tx, InlineKey) (R, []byte, error), body func(context.Context, *sql.Tx) (R, error)) (R, error) {
	var zero R
	t, err := newSQLAttempt(ctx, s, c)
	if err != nil {
		return zero, err
	}
	defer t.done(ctx, s)
	if err := t.open(ctx); err != nil {
		return zero, storeErr(c.method, "begin", err)
	}

	k, ev, out, berr := runInlineBody(ctx, s, c, t.tx, body)
	if lostInlineClaim(q.schema, berr) {
		// Another row holds the key: end the aborted transaction and
		// answer from that row.
		_ = t.tx.Rollback()
		return inlineSQLAnswer(ctx, s, m, q, c, t.conn, lookup, k)
	}
	if berr != nil {
		return zero, berr
	}
	if err := commit(ctx, s, c, t, nil, q.Check, []any{c.scope, c.key, c.fp}, "check key and commit", keyNotWritten(c, q)); err != nil {
		return zero, err
	}
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}

// inlineSQLAnswer answers a refused claim on conn, in a transaction of its
// own: it frees the key if it has expired, runs the lookup, and commits;
// then inlineSettle decides. Before a replay it asks whether commits wait
// for a synchronous standby and, if they do, confirms the row is there.
func inlineSQLAnswer[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, conn *sql.Conn, lookup func(context.Context, *sql.Tx, InlineKey) (R, []byte, error), k InlineKey) (R, error) {
	var zero R
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return zero, storeErr(c.method, "look up the row holding the key", err)
	}
	defer func() { _ = tx.Rollback() }() // ErrTxDone after the commit
	freed, out, stored, lerr := inlineSQLLookup(ctx, s, m, q, c, tx, lookup, k)
	if lerr == nil || errors.Is(lerr, pgx.ErrNoRows) {
		if err := tx.Commit(); err != nil {
			return zero, storeErr(c.method, "look up the row holding the key", err)
		}
	}
	confirm := func(ctx context.Context) error {
		return rawConn(conn, func(pc *pgx.Conn) error {
			return s.confirmReplication(ctx, pgxStmts{pc}, pc.PgConn(), c, "", true)
		})
	}
	return inlineSettle(ctx, s, c, out, stored, lerr, freed, confirm)
}

// inlineSQLLookup frees the key if it has expired, then runs the lookup.
// No row is reported as pgx.ErrNoRows, as inlineSettle expects.
func inlineSQLLookup[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, tx *sql.Tx, lookup func(context.Context, *sql.Tx, InlineKey) (R, []byte, error), k InlineKey) (freed bool, out R, stored []byte, err error) {
	free, args := q.freeStmt(s, c, m.retention(s))
	res, err := tx.ExecContext(ctx, free, args...)
	if err != nil {
		return false, out, nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err == nil, out, nil, err
	}
	out, stored, err = lookup(context.WithValue(ctx, inlineKeyCtx, k), tx, k)
	return false, out, stored, sqlErr(err)
}

// inlineSQLInTx is InlineInTx on the database/sql driver: the body runs
// under a savepoint in the caller's tx; a refused claim rolls back to it and
// the lookup runs in tx. A key freed on the way is errKeyFreed: InlineInTx
// claims it once more.
func inlineSQLInTx[R any](ctx context.Context, s *Store, tx *sql.Tx, m *InlineMethod[R], q *inlineQueries, c call,
	lookup func(context.Context, *sql.Tx, InlineKey) (R, []byte, error), body func(context.Context, *sql.Tx) (R, error)) (R, error) {
	var zero R
	const sp = "idem_inline"
	t := sqlStmts{tx: tx}
	if _, err := t.Exec(ctx, "SAVEPOINT "+sp); err != nil {
		return zero, storeErr(c.method, "savepoint", err)
	}
	released := false
	defer func() { // error paths and panics
		if !released {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
			defer cancel()
			_, _ = t.Exec(uctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp)
		}
	}()

	k, ev, out, berr := runInlineBody(ctx, s, c, tx, body)
	if lostInlineClaim(q.schema, berr) {
		released = true
		if _, err := t.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp); err != nil {
			return zero, storeErr(c.method, "roll back to the savepoint", err)
		}
		freed, out, stored, lerr := inlineSQLLookup(ctx, s, m, q, c, tx, lookup, k)
		confirm := func(ctx context.Context) error {
			sync, err := t.syncRep(ctx)
			if err != nil || !sync {
				return err
			}
			return s.confirmInTx(ctx, t, c)
		}
		return inlineSettle(ctx, s, c, out, stored, lerr, freed, confirm)
	}
	if berr != nil {
		return zero, berr
	}
	if _, err := t.Exec(ctx, q.Check, c.scope, c.key, c.fp); err != nil {
		if isDivisionByZero(err) {
			return zero, keyNotWritten(c, q)
		}
		return zero, storeErr(c.method, "check key", err)
	}
	if _, err := t.Exec(ctx, "RELEASE SAVEPOINT "+sp); err != nil {
		return zero, storeErr(c.method, "check key", err)
	}
	released = true
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}
