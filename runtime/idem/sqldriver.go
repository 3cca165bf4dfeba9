package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The database/sql driver: the same ledger statements as the pgx driver
// (pgxdriver.go), sent one at a time. database/sql has no way to
// queue a statement behind another, and a *sql.Tx is begun and committed by
// database/sql itself: BEGIN cannot travel with the claim, nor COMMIT with
// the response. Whether commits wait for a synchronous standby comes with
// the claim's row on both transports (syncRepColumn); only inline mode's
// replay, whose lookup is the user's statement, asks it in one of its own.

// sqlDriver is the driver of *sql.Tx, on a store made by NewSQLStore.
type sqlDriver struct{}

var _ driver[*sql.Tx] = sqlDriver{}

// attempt takes a connection from the store's *sql.DB; the body's *sql.Tx
// is begun by the claim. database/sql cannot tell a body that ended its
// *sql.Tx: the finish statement finds it done (sqlErr).
func (sqlDriver) attempt(ctx context.Context, s *Store, c call) (attemptTx, func() *sql.Tx, func() bool, error) {
	t, err := newSQLAttempt(ctx, s, c)
	if err != nil {
		return nil, nil, nil, err
	}
	return t, func() *sql.Tx { return t.tx }, func() bool { return false }, nil
}

func (sqlDriver) inTx(tx *sql.Tx) ledgerTx { return sqlInTx{sqlStmts{tx: tx}} }

// sqlStmts is what the database/sql driver send statements on: the
// attempt's *sql.Tx, or the caller's.
type sqlStmts struct {
	tx *sql.Tx
}

// QueryRow runs one statement on the transaction.
func (t sqlStmts) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return sqlRow{t.tx.QueryRowContext(ctx, query, args...)}
}

// Exec runs one statement on the transaction. The command tag carries only
// the affected row count.
func (t sqlStmts) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	res, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return pgconn.CommandTag{}, sqlErr(err)
	}
	return affected(res)
}

// syncRep reports whether the session's commits wait for a synchronous
// standby (syncRepSQL): for inline mode's replay.
func (t sqlStmts) syncRep(ctx context.Context) (bool, error) {
	var one int
	err := t.QueryRow(ctx, syncRepSQL).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// claimStmt runs the claim statement and scans its row.
func (t sqlStmts) claimStmt(ctx context.Context, query string, args, dest []any) error {
	return t.QueryRow(ctx, query, args...).Scan(dest...)
}

// sqlAttempt is the database/sql transport of an attempt's own transaction,
// on a connection of the store's *sql.DB. The transaction is begun under a
// context detached from the caller's (see Store.commitContext): database/sql
// rolls back a transaction whose context ends, and commits under it, so
// that context is the COMMIT's.
type sqlAttempt struct {
	sqlStmts
	s      *Store
	conn   *sql.Conn
	pc     *pgconn.PgConn // the connection's pgx side, for its notices
	txCtx  context.Context
	cancel context.CancelFunc
}

var _ attemptTx = (*sqlAttempt)(nil)

// newSQLAttempt takes a connection from the store's *sql.DB.
func newSQLAttempt(ctx context.Context, s *Store, c call) (*sqlAttempt, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, storeErr(c.method, "acquire connection", err)
	}
	t := &sqlAttempt{s: s, conn: conn}
	if err := rawConn(conn, func(pc *pgx.Conn) error { t.pc = pc.PgConn(); return nil }); err != nil {
		_ = conn.Close()
		return nil, storeErr(c.method, "acquire connection", err)
	}
	return t, nil
}

func (t *sqlAttempt) claim(ctx context.Context, begin, query string, args []any, dest []any) error {
	if begin != "BEGIN" {
		return fmt.Errorf("idem: internal error: an attempt's transaction begins with BEGIN, not %q", begin)
	}
	t.txCtx, t.cancel = t.s.commitContext(ctx)
	tx, err := t.conn.BeginTx(t.txCtx, nil)
	if err != nil {
		return err
	}
	t.tx = tx
	return t.claimStmt(ctx, query, args, dest)
}

func (t *sqlAttempt) finish(_ context.Context, stmt string, args []any, end string) (string, error) {
	if end != "COMMIT" {
		return "", fmt.Errorf("idem: internal error: an attempt's transaction ends with COMMIT, not %q", end)
	}
	if _, err := t.tx.ExecContext(t.txCtx, stmt, args...); err != nil {
		return "", sqlErr(err)
	}
	err := t.tx.Commit()
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return "ROLLBACK", nil
	}
	if err != nil {
		return "", sqlErr(err)
	}
	return "COMMIT", nil
}

func (t *sqlAttempt) commitContext(context.Context, *Store) (context.Context, context.CancelFunc) {
	return t.txCtx, func() {}
}

func (t *sqlAttempt) pgConn() *pgconn.PgConn { return t.pc }

func (t *sqlAttempt) confirmReplay(ctx context.Context, s *Store, c call) error {
	_ = t.tx.Rollback() // a read-only transaction: its end changes nothing
	return rawConn(t.conn, func(pc *pgx.Conn) error {
		return s.confirmReplication(ctx, pc, pc.PgConn(), c, "", false)
	})
}

func (t *sqlAttempt) done(_ context.Context, s *Store, how attemptEnd) {
	end := func() {
		if t.tx != nil {
			_ = t.tx.Rollback() // ErrTxDone after a commit
		}
		if t.cancel != nil {
			t.cancel()
		}
		_ = t.conn.Close()
	}
	if how == endReplayed {
		s.afterAnswer(end)
		return
	}
	end()
}

// sqlInTx is the database/sql transport of a savepoint in the caller's
// *sql.Tx.
type sqlInTx struct {
	sqlStmts
}

var _ ledgerTx = sqlInTx{}

func (t sqlInTx) claim(ctx context.Context, begin, query string, args []any, dest []any) error {
	if _, err := t.tx.ExecContext(ctx, begin); err != nil {
		return sqlErr(err)
	}
	return t.claimStmt(ctx, query, args, dest)
}

func (t sqlInTx) finish(ctx context.Context, stmt string, args []any, end string) (string, error) {
	if _, err := t.tx.ExecContext(ctx, stmt, args...); err != nil {
		return "", sqlErr(err)
	}
	if _, err := t.tx.ExecContext(ctx, end); err != nil {
		return "", sqlErr(err)
	}
	return end, nil
}
