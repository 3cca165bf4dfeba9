package idem

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Inline mode on the pgx driver: the body's pgx.Tx is an inlineTx
// (inlinetx.go), which opens the transaction (or the savepoint) with the
// body's first statement, sees the INSERT that loses the claim, and sends
// the key check with COMMIT (or RELEASE) in one round trip.

// inlinePgxAttempt is one attempt of Inline on the pgx driver.
func inlinePgxAttempt[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), body func(context.Context, pgx.Tx) (R, error)) (R, error) {
	var zero R
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return zero, storeErr(c.method, "acquire connection", err)
	}
	defer conn.Release()
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' { // error, refused claim, or a panic on its way up
			s.rollback(ctx, conn)
		}
	}()

	pc := conn.Conn()
	// BEGIN travels with the body's first statement.
	tx := newInlineTx(pc, pc, q.schema, func(ctx context.Context) (pgx.Tx, error) {
		return pc.BeginTx(ctx, pgx.TxOptions{BeginQuery: "SELECT 1"})
	}, "BEGIN")
	k, ev, out, berr := runInlineBody(ctx, s, c, pgx.Tx(tx), body)
	if tx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	if tx.lostClaim() {
		// Another row holds the key. End the aborted transaction and free
		// the key if it has expired, both in the lookup's round trip; the
		// lookup then reads outside any transaction.
		var prefix []pendingStmt
		if tx.opened() {
			prefix = append(prefix, pendingStmt{sql: "ROLLBACK"})
		}
		syncRep := false
		prefix = append(prefix, pendingStmt{sql: ledger.SyncRepSQL, done: func(tag pgconn.CommandTag) { syncRep = tag.RowsAffected() == 1 }})
		confirm := func(ctx context.Context) error {
			if !syncRep {
				return nil
			}
			return s.confirmReplication(ctx, pgxStmts{pc}, pc.PgConn(), c, "", false)
		}
		return inlineAnswer(ctx, s, m, q, c, tx, prefix, lookup, k, confirm)
	}
	if berr != nil {
		return zero, berr
	}
	if !tx.opened() {
		return zero, fmt.Errorf("idem: %s: %w: the method sent no statement; write idem.InlineKeyFrom(ctx) into %s's idempotency columns", c.method, ErrKeyNotWritten, q.schema.Table)
	}

	// The key check and COMMIT travel in one round trip.
	t := &pgxAttempt{conn: conn}
	if err := commit(ctx, s, c, t, nil, q.Check, []any{c.scope, c.key, c.fp}, "check key and commit", keyNotWritten(c, q)); err != nil {
		return zero, err
	}
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}

// inlineAnswer answers a refused claim from the row that holds the key: it
// sends prefix and the statement freeing an expired key ahead of the
// lookup's first statement, then compares fingerprints.
//
// confirm runs before the row is replayed: it makes sure the row is on a
// synchronous standby (see replication.go).
func inlineAnswer[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, tx *inlineTx, prefix []pendingStmt, lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), k InlineKey, confirm func(context.Context) error) (R, error) {
	var zero R
	freed := false
	free, args := q.freeStmt(s, c, m.retention(s))
	prefix = append(prefix, pendingStmt{
		sql:  free,
		args: args,
		done: func(tag pgconn.CommandTag) { freed = tag.RowsAffected() > 0 },
	})
	tx.reset(prefix)
	lctx := context.WithValue(ctx, inlineKeyCtx, k)
	out, stored, lerr := lookup(lctx, tx, k)
	if ferr := tx.flush(ctx); ferr != nil && lerr == nil {
		lerr = ferr
	}
	if tx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: lookup: %w", c.method, errBodyEndedTx)
	}
	return inlineSettle(ctx, s, c, out, stored, lerr, freed, confirm)
}

// inlinePgxInTx is InlineInTx on the pgx driver. A key freed on the way is
// errKeyFreed: InlineInTx claims it once more.
func inlinePgxInTx[R any](ctx context.Context, s *Store, tx pgx.Tx, m *InlineMethod[R], q *inlineQueries, c call,
	lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), body func(context.Context, pgx.Tx) (R, error)) (R, error) {
	var zero R
	const sp = "idem_inline"
	itx := newInlineTx(tx.Conn(), tx, q.schema, func(context.Context) (pgx.Tx, error) { return tx, nil }, "SAVEPOINT "+sp)
	undo := func() error {
		if !itx.opened() {
			return nil
		}
		// One simple-protocol string: an aborted transaction refuses to
		// prepare anything but its own end. Bounded like every write made
		// after the caller's context may have ended.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
		defer cancel()
		_, err := tx.Exec(uctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp)
		return err
	}
	released := false
	defer func() { // error paths and panics
		if !released {
			_ = undo()
		}
	}()

	k, ev, out, berr := runInlineBody(ctx, s, c, pgx.Tx(itx), body)
	if itx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	if itx.lostClaim() {
		released = true
		syncRep := false
		prefix := []pendingStmt{{sql: "ROLLBACK TO SAVEPOINT " + sp}, {sql: "RELEASE SAVEPOINT " + sp},
			{sql: ledger.SyncRepSQL, done: func(tag pgconn.CommandTag) { syncRep = tag.RowsAffected() == 1 }}}
		confirm := func(ctx context.Context) error {
			if !syncRep {
				return nil
			}
			return s.confirmInTx(ctx, pgxStmts{tx}, c)
		}
		return inlineAnswer(ctx, s, m, q, c, itx, prefix, lookup, k, confirm)
	}
	if berr != nil {
		return zero, berr
	}
	if !itx.opened() {
		return zero, fmt.Errorf("idem: %s: %w: the method sent no statement; write idem.InlineKeyFrom(ctx) into %s's idempotency columns", c.method, ErrKeyNotWritten, q.schema.Table)
	}
	b := &pgx.Batch{}
	b.Queue(q.Check, c.scope, c.key, c.fp)
	b.Queue("RELEASE SAVEPOINT " + sp)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if isDivisionByZero(err) {
		_ = br.Close()
		return zero, keyNotWritten(c, q)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return zero, storeErr(c.method, "check key", err)
	}
	released = true
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}
