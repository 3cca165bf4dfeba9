package idem

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// The database/sql driver: the same ledger statements as the pgx driver
// (pgxdriver.go), sent one at a time. database/sql has no way to queue a
// statement behind another, and a *sql.Tx is begun and committed by
// database/sql itself: BEGIN cannot travel with the body's first
// statement, nor COMMIT with the record statement; each is a round trip of
// its own. Whether commits wait for a synchronous standby comes with the
// lookup's row on both transports (ledger.Statements.Read); only inline mode's
// replay, whose lookup is the user's statement, asks it in one of its own.

// sqlDriver is the driver of *sql.Tx, on a store made by NewSQLStore.
type sqlDriver struct{}

var _ driver[*sql.Tx] = sqlDriver{}

// attempt takes a connection from the store's *sql.DB; the body's *sql.Tx
// is begun by open. database/sql cannot tell a body that ended its
// *sql.Tx: the record statement finds it done (sqlErr).
func (sqlDriver) attempt(ctx context.Context, s *Store, c call) (attemptTx, func() *sql.Tx, func() bool, error) {
	t, err := newSQLAttempt(ctx, s, c)
	if err != nil {
		return nil, nil, nil, err
	}
	t.keyLock = s.keyLockArgs(c)
	return t, func() *sql.Tx { return t.tx }, func() bool { return false }, nil
}

// inTx carries the statements on the caller's *sql.Tx; the body gets it
// too, the savepoint and the key's lock sent before the body runs.
func (sqlDriver) inTx(s *Store, c call, tx *sql.Tx) (ledgerTx, *sql.Tx, func() bool) {
	return &sqlInTx{sqlStmts: sqlStmts{tx: tx}, s: s, keyLock: s.keyLockArgs(c)}, tx, func() bool { return false }
}

// takeKeyLock sends the key's lock statement (keylock.go) with args on tx,
// a round trip of its own, and records in w a wait that ran out. nil args
// take no lock.
func takeKeyLock(ctx context.Context, tx *sql.Tx, args []any, w *keyWait) error {
	if args == nil {
		return nil
	}
	if _, err := tx.ExecContext(ctx, ledger.KeyLockSQL, args...); err != nil {
		err = sqlErr(err)
		w.failed(err)
		return err
	}
	return nil
}

// sqlStmts is what the database/sql driver sends statements on: a
// transaction.
type sqlStmts struct {
	tx *sql.Tx
}

// QueryRow runs one statement on the transaction.
func (t sqlStmts) QueryRow(ctx context.Context, query string, args ...any) row {
	return sqlRow{t.tx.QueryRowContext(ctx, query, args...)}
}

// Exec runs one statement on the transaction. The command tag carries only
// the affected row count.
func (t sqlStmts) Exec(ctx context.Context, query string, args ...any) (cmdTag, error) {
	res, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return cmdTag{}, sqlErr(err)
	}
	return affected(res)
}

// syncRep reports whether the session's commits wait for a synchronous
// standby (ledger.SyncRepSQL): for inline mode's replay.
func (t sqlStmts) syncRep(ctx context.Context) (bool, error) {
	var one int
	err := t.QueryRow(ctx, ledger.SyncRepSQL).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// sqlAttempt is the database/sql transport of an attempt's own connection
// of the store's *sql.DB: the lookup in autocommit, then the body's
// transaction. That transaction is begun under a context detached from the
// caller's (see Store.commitContext): database/sql rolls back a
// transaction whose context ends, and commits under it, so that context is
// the COMMIT's.
type sqlAttempt struct {
	keyWait
	keyLock []any // the key's lock statement's arguments: nil for inline mode, which takes none
	s       *Store
	conn    *sql.Conn
	pc      *pgconn.PgConn // the connection's pgx side, for its notices
	tx      *sql.Tx        // the body's, once open
	txCtx   context.Context
	cancel  context.CancelFunc
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

// QueryRow runs one statement on the connection, outside any transaction.
func (t *sqlAttempt) QueryRow(ctx context.Context, query string, args ...any) row {
	return sqlRow{t.conn.QueryRowContext(ctx, query, args...)}
}

// Exec runs one statement on the connection, outside any transaction.
func (t *sqlAttempt) Exec(ctx context.Context, query string, args ...any) (cmdTag, error) {
	res, err := t.conn.ExecContext(ctx, query, args...)
	if err != nil {
		return cmdTag{}, sqlErr(err)
	}
	return affected(res)
}

func (t *sqlAttempt) open(ctx context.Context) error {
	t.txCtx, t.cancel = t.s.commitContext(ctx)
	tx, err := t.conn.BeginTx(t.txCtx, nil)
	if err != nil {
		t.cancel()
		return sqlErr(err)
	}
	t.tx = tx
	return takeKeyLock(ctx, tx, t.keyLock, &t.keyWait)
}

func (t *sqlAttempt) finish(_ context.Context, prelude []string, stmt string, args []any) (string, error) {
	if err := execPrelude(t.txCtx, t.tx, prelude); err != nil {
		return "", err
	}
	if _, err := t.tx.ExecContext(t.txCtx, stmt, args...); err != nil {
		return "", stmtErr(sqlErr(err))
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

func (t *sqlAttempt) abandon(context.Context) error {
	if t.tx == nil {
		return nil
	}
	err := t.tx.Rollback()
	t.tx = nil
	t.cancel()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil // ended by a failed COMMIT, or by the body
	}
	return err
}

func (t *sqlAttempt) commitContext(context.Context, *Store) (context.Context, context.CancelFunc) {
	return t.txCtx, func() {}
}

func (t *sqlAttempt) pgConn() *pgconn.PgConn { return t.pc }

func (t *sqlAttempt) confirmReplay(ctx context.Context, s *Store, c call) error {
	return rawConn(t.conn, func(pc *pgx.Conn) error {
		return s.confirmReplication(ctx, pgxStmts{pc}, pc.PgConn(), c, "", false)
	})
}

func (t *sqlAttempt) done(context.Context, *Store) {
	if t.tx != nil {
		_ = t.tx.Rollback() // ErrTxDone after a commit
	}
	if t.cancel != nil {
		t.cancel()
	}
	_ = t.conn.Close()
}

// sqlInTx is the database/sql transport of the caller's *sql.Tx: the
// lookup runs in it, the body under a savepoint.
type sqlInTx struct {
	sqlStmts
	keyWait
	s       *Store
	keyLock []any // the key's lock statement's arguments
	opened  bool  // the savepoint was made
}

var _ ledgerTx = (*sqlInTx)(nil)

func (t *sqlInTx) open(ctx context.Context) error {
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return sqlErr(err)
	}
	t.opened = true
	return takeKeyLock(ctx, t.tx, t.keyLock, &t.keyWait)
}

func (t *sqlInTx) finish(ctx context.Context, prelude []string, stmt string, args []any) (string, error) {
	if err := execPrelude(ctx, t.tx, prelude); err != nil {
		return "", err
	}
	if _, err := t.tx.ExecContext(ctx, stmt, args...); err != nil {
		return "", stmtErr(sqlErr(err))
	}
	end := "RELEASE SAVEPOINT " + savepoint
	if _, err := t.tx.ExecContext(ctx, end); err != nil {
		return "", sqlErr(err)
	}
	t.opened = false
	return end, nil
}

func (t *sqlInTx) abandon(ctx context.Context) error {
	if !t.opened {
		return nil
	}
	t.opened = false
	return t.s.rollbackToSavepoint(ctx, t)
}

// execPrelude sends the prelude's statements on tx, as one string of
// statements without parameters (one round trip).
func execPrelude(ctx context.Context, tx *sql.Tx, prelude []string) error {
	if len(prelude) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, strings.Join(prelude, "; ")); err != nil {
		return sqlErr(err)
	}
	return nil
}
