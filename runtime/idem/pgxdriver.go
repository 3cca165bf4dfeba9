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

// ledgerTx carries the ledger statements of one atomic call on its
// transaction: an attempt's own transaction (Atomic), or a savepoint in the
// caller's (AtomicInTx).
type ledgerTx interface {
	// QueryRow runs one statement on the open transaction.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	// Exec runs one statement on the open transaction.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)

	// claim sends begin (BEGIN or a SAVEPOINT) and the claim statement
	// sql, and scans the claim's row into dest.
	claim(ctx context.Context, begin, sql string, args []any, dest []any) error
	// finish runs stmt, then end (COMMIT, or RELEASE SAVEPOINT), and
	// returns end's command tag. stmt's failure is returned as is
	// (isDivisionByZero tells the finish statement's refusal).
	finish(ctx context.Context, stmt string, args []any, end string) (endTag string, err error)
}

// attemptTx is a ledgerTx on a transaction the attempt owns: it also knows
// the connection (for the server's notices), how the COMMIT is bounded, and
// how the transaction ends when it does not commit.
type attemptTx interface {
	ledgerTx
	// commitContext is the context the finish statement and COMMIT run
	// under (see Store.commitContext).
	commitContext(ctx context.Context, s *Store) (context.Context, context.CancelFunc)
	// pgConn is the connection, whose notices say whether a COMMIT
	// reached the synchronous standby (NoticeHandler).
	pgConn() *pgconn.PgConn
	// confirmReplay ends the transaction and confirms that every row
	// committed before is on the synchronous standby (confirmReplication).
	confirmReplay(ctx context.Context, s *Store, c call) error
	// done ends the attempt: gives the connection back after a commit,
	// rolls back in the background after a replay (the answer is the
	// caller's already), and rolls back otherwise.
	done(ctx context.Context, s *Store, how attemptEnd)
}

// attemptEnd is how an attempt's transaction ended.
type attemptEnd int

const (
	endFailed    attemptEnd = iota // error, lost claim, or a panic on its way up
	endCommitted                   // committed (or already ended)
	endReplayed                    // read only: roll back without making the caller wait
)

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

// maxBehind is how many replays' rollbacks a store runs at once after
// their callers have the answer.
const maxBehind = 4

// afterAnswer ends a replay's read-only transaction (end), in the
// background when fewer than maxBehind others are, so that the caller does
// not wait for it; otherwise now. Each one in the background holds its
// connection: unbounded, a burst of replays would make the pool open a
// connection for nearly every call (63 of 80 for 16 goroutines replaying
// for 4 s, where 16 serve them), each paying a backend's start and the
// claim statement's first plans. Bounded, a caller waits for its own
// ROLLBACK only when the store is that busy.
func (s *Store) afterAnswer(end func()) {
	select {
	case s.behind <- struct{}{}:
		go func() {
			defer func() { <-s.behind }()
			end()
		}()
	default:
		end()
	}
}
