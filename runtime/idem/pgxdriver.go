package idem

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// One protocol, two drivers (driver.go).
//
// The ledger's statements and the decisions around them (claim, atomicRun,
// atomicInTxRun) are written once. What differs between the pgx driver and
// the database/sql driver is only how the statements travel: pgx pipelines
// them (BEGIN or SAVEPOINT with the claim, the response with COMMIT or
// RELEASE, in one round trip each); database/sql sends one statement at a
// time, since it has no way to queue a statement behind another
// (sqldriver.go). A ledgerTx is that difference, and nothing else.

// pgxDriver is the driver of pgx.Tx, on a store made by NewStore.
type pgxDriver struct{}

var _ driver[pgx.Tx] = pgxDriver{}

// attempt acquires a connection from the store's pool. The body's pgx.Tx
// is a pipelinedTx: its BEGIN goes out with the claim, its COMMIT with
// the response, and it refuses Commit and Rollback.
func (pgxDriver) attempt(ctx context.Context, s *Store, c call) (attemptTx, func() pgx.Tx, func() bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, nil, storeErr(c.method, "acquire connection", err)
	}
	tx := &pipelinedTx{conn: conn.Conn()}
	return &pgxAttempt{conn: conn}, func() pgx.Tx { return tx }, tx.bodyEnded, nil
}

func (pgxDriver) inTx(tx pgx.Tx) ledgerTx { return &pgxInTx{tx: tx} }

// pgxAttempt is the pgx transport of an attempt's own transaction: BEGIN
// travels with the claim and COMMIT with the response, in one batch each.
type pgxAttempt struct {
	conn *pgxpool.Conn
}

var _ attemptTx = (*pgxAttempt)(nil)

func (t *pgxAttempt) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pgxAttempt) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pgxAttempt) claim(ctx context.Context, begin, sql string, args []any, dest []any) error {
	return claimBatch(ctx, t.conn, begin, sql, args, dest)
}

func (t *pgxAttempt) finish(ctx context.Context, stmt string, args []any, end string) (string, error) {
	return finishBatch(ctx, t.conn, stmt, args, end)
}

func (t *pgxAttempt) commitContext(ctx context.Context, s *Store) (context.Context, context.CancelFunc) {
	return s.commitContext(ctx)
}

func (t *pgxAttempt) pgConn() *pgconn.PgConn { return t.conn.Conn().PgConn() }

func (t *pgxAttempt) confirmReplay(ctx context.Context, s *Store, c call) error {
	// The ROLLBACK goes out with the confirmation, in one round trip.
	return s.confirmReplication(ctx, t.conn, t.pgConn(), c, "ROLLBACK", false)
}

func (t *pgxAttempt) done(ctx context.Context, s *Store, how attemptEnd) {
	switch how {
	case endCommitted:
		t.conn.Release()
	case endReplayed:
		s.afterAnswer(func() { s.rollback(ctx, t.conn); t.conn.Release() })
	default:
		s.rollback(ctx, t.conn)
		t.conn.Release()
	}
}

// pgxInTx is the pgx transport of a savepoint in the caller's transaction:
// the savepoint travels with the claim and RELEASE with the response.
type pgxInTx struct {
	tx pgx.Tx
}

var _ ledgerTx = (*pgxInTx)(nil)

func (t *pgxInTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *pgxInTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}

func (t *pgxInTx) claim(ctx context.Context, begin, sql string, args []any, dest []any) error {
	return claimBatch(ctx, t.tx, begin, sql, args, dest)
}

func (t *pgxInTx) finish(ctx context.Context, stmt string, args []any, end string) (string, error) {
	return finishBatch(ctx, t.tx, stmt, args, end)
}

// batcher is what the pgx transports send batches on.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// claimBatch sends begin and the claim in one round trip and scans the
// claim's row into dest.
func claimBatch(ctx context.Context, conn batcher, begin, sql string, args []any, dest []any) error {
	b := &pgx.Batch{}
	b.Queue(begin)
	b.Queue(sql, args...)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// finishBatch sends stmt and end in one round trip and returns end's
// command tag.
func finishBatch(ctx context.Context, conn batcher, stmt string, args []any, end string) (string, error) {
	b := &pgx.Batch{}
	b.Queue(stmt, args...)
	b.Queue(end)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if isDivisionByZero(err) {
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
