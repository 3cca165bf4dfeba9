package idem

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// One protocol, two drivers (driver.go).
//
// The ledger's statements and the decisions around them (atomicRun,
// atomicInTxRun) are written once. What differs between the pgx driver and
// the database/sql driver is only how the statements travel: pgx queues
// BEGIN (or the SAVEPOINT) ahead of the body's first statement and sends
// the record statement with COMMIT (or RELEASE), in one round trip each;
// database/sql sends one statement at a time, since it has no way to queue
// a statement behind another (sqldriver.go). A ledgerTx is that
// difference, and nothing else.

// pgxDriver is the driver of pgx.Tx, on a store made by NewStore.
type pgxDriver struct{}

var _ driver[pgx.Tx] = pgxDriver{}

// savepoint is the savepoint an atomic body runs under in the caller's
// transaction (AtomicInTx).
const savepoint = "idem_claim"

// attempt acquires a connection from the store's pool. The body's pgx.Tx
// is an inlineTx (inlinetx.go) watching no index: BEGIN and the key's lock
// (keylock.go) travel with the body's first statement, COMMIT with the
// record statement, and it refuses Commit and Rollback.
func (pgxDriver) attempt(ctx context.Context, s *Store, c call) (attemptTx, func() pgx.Tx, func() bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, nil, storeErr(c.method, "acquire connection", err)
	}
	pc := conn.Conn()
	t := &pgxAttempt{s: s, conn: conn}
	tx := newInlineTx(pc, pc, ledger.Inline{}, func(ctx context.Context) (pgx.Tx, error) {
		return pc.BeginTx(ctx, pgx.TxOptions{BeginQuery: "SELECT 1"})
	}, "BEGIN", s.keyLockStmt(c, &t.keyWait)...)
	t.tx = tx
	return t, func() pgx.Tx { return tx }, tx.bodyEnded, nil
}

// inTx wraps the caller's transaction: the body's pgx.Tx sends the
// savepoint and the key's lock with its first statement. The lock is taken
// under the savepoint, so a wait that runs out rolls back to it; once
// released, the savepoint's lock is the caller's transaction's until it
// ends.
func (pgxDriver) inTx(s *Store, c call, tx pgx.Tx) (ledgerTx, pgx.Tx, func() bool) {
	t := &pgxInTx{s: s, tx: tx}
	if tx != nil {
		t.body = newInlineTx(tx.Conn(), tx, ledger.Inline{}, func(context.Context) (pgx.Tx, error) { return tx, nil },
			"SAVEPOINT "+savepoint, s.keyLockStmt(c, &t.keyWait)...)
	}
	itx := t.body
	return t, itx, func() bool { return itx != nil && itx.bodyEnded() }
}

// pgxAttempt is the pgx transport of an attempt's own connection: the
// lookup in autocommit, then the body's transaction.
type pgxAttempt struct {
	keyWait
	s    *Store
	conn *pgxpool.Conn
	tx   *inlineTx // the body's: BEGIN is pending until its first statement (nil in inline mode)
}

var _ attemptTx = (*pgxAttempt)(nil)

func (t *pgxAttempt) QueryRow(ctx context.Context, sql string, args ...any) row {
	return pgxStmts{t.conn}.QueryRow(ctx, sql, args...)
}

func (t *pgxAttempt) Exec(ctx context.Context, sql string, args ...any) (cmdTag, error) {
	return pgxStmts{t.conn}.Exec(ctx, sql, args...)
}

func (t *pgxAttempt) open(context.Context) error { return nil }

func (t *pgxAttempt) finish(ctx context.Context, prelude []string, stmt string, args []any) (string, error) {
	var pending []pendingStmt
	if t.tx != nil { // nil for inline mode's check (inlinepgx.go)
		pending = t.tx.takePending()
	}
	return finishBatch(ctx, t.conn, withPrelude(pending, prelude), stmt, args, "COMMIT")
}

func (t *pgxAttempt) abandon(ctx context.Context) error {
	if t.tx != nil {
		t.tx.takePending()
	}
	pc := t.conn.Conn().PgConn()
	if pc.TxStatus() == 'I' {
		return nil
	}
	t.s.rollback(ctx, t.conn)
	if pc.IsClosed() {
		return errors.New("roll back: the connection was closed")
	}
	return nil
}

func (t *pgxAttempt) commitContext(ctx context.Context, s *Store) (context.Context, context.CancelFunc) {
	return s.commitContext(ctx)
}

func (t *pgxAttempt) pgConn() *pgconn.PgConn { return t.conn.Conn().PgConn() }

func (t *pgxAttempt) confirmReplay(ctx context.Context, s *Store, c call) error {
	return s.confirmReplication(ctx, pgxStmts{t.conn}, t.pgConn(), c, "", false)
}

func (t *pgxAttempt) done(ctx context.Context, s *Store) {
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		s.rollback(ctx, t.conn)
	}
	t.conn.Release()
}

// rollback ends the connection's transaction even if ctx is done, bounded by
// the finalise timeout. If that fails the connection is closed, so the pool
// never reuses it mid-transaction.
func (s *Store) rollback(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// pgxInTx is the pgx transport of the caller's transaction: the lookup
// runs in it, the body under a savepoint that travels with the body's
// first statement, and RELEASE goes out with the record statement.
type pgxInTx struct {
	keyWait
	s        *Store
	tx       pgx.Tx
	body     *inlineTx
	sentOpen bool // the savepoint went out with the record statement
}

var _ ledgerTx = (*pgxInTx)(nil)

func (t *pgxInTx) QueryRow(ctx context.Context, sql string, args ...any) row {
	return pgxStmts{t.tx}.QueryRow(ctx, sql, args...)
}

func (t *pgxInTx) Exec(ctx context.Context, sql string, args ...any) (cmdTag, error) {
	return pgxStmts{t.tx}.Exec(ctx, sql, args...)
}

func (t *pgxInTx) open(context.Context) error { return nil }

func (t *pgxInTx) finish(ctx context.Context, prelude []string, stmt string, args []any) (string, error) {
	pending := t.body.takePending()
	if len(pending) > 0 {
		t.sentOpen = true // the body sent nothing: the savepoint goes in this batch
	}
	return finishBatch(ctx, t.tx, withPrelude(pending, prelude), stmt, args, "RELEASE SAVEPOINT "+savepoint)
}

// withPrelude appends the prelude's statements to the pending ones.
func withPrelude(pending []pendingStmt, prelude []string) []pendingStmt {
	for _, p := range prelude {
		pending = append(pending, pendingStmt{sql: p})
	}
	return pending
}

func (t *pgxInTx) abandon(ctx context.Context) error {
	t.body.takePending()
	if !t.body.opened() && !t.sentOpen {
		return nil
	}
	return t.s.rollbackToSavepoint(ctx, pgxStmts{t.tx})
}

// rollbackToSavepoint rolls the caller's transaction back to the body's
// savepoint and releases it, even if ctx is done, bounded by the finalise
// timeout: the caller's transaction is usable again.
func (s *Store) rollbackToSavepoint(ctx context.Context, q stmts) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
	defer cancel()
	// One simple-protocol string: an aborted transaction refuses to
	// prepare anything but its own end, RELEASE included.
	_, err := q.Exec(uctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint)
	return err
}

// batcher is what the pgx transports send batches on.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// finishBatch sends the pending statements (the body's BEGIN or SAVEPOINT
// when it sent nothing, and a prelude), stmt and end in one round trip and returns end's
// command tag.
func finishBatch(ctx context.Context, conn batcher, pending []pendingStmt, stmt string, args []any, end string) (string, error) {
	b := &pgx.Batch{}
	for _, p := range pending {
		b.Queue(p.sql, p.args...)
	}
	b.Queue(stmt, args...)
	b.Queue(end)
	br := conn.SendBatch(ctx, b)
	var err error
	for _, p := range pending {
		if _, err = br.Exec(); err != nil {
			p.fail(err)
			break
		}
	}
	if err == nil {
		_, err = br.Exec()
		err = stmtErr(err)
	}
	if refusedRecord(err) {
		_ = br.Close()
		return "", err
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.String(), err
}
