package idem

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A driver is how the protocol reaches PostgreSQL through one kind of
// database handle. TTx is the transaction a method's body takes: pgx.Tx
// (pgxDriver, pgxdriver.go: a store made by NewStore) or *sql.Tx
// (sqlDriver, sqldriver.go: a store made by NewSQLStore). The entry points
// (Atomic, AtomicInTx, Inline, InlineInTx) are written once over it: the
// type of the body picks the driver (driverFor, dispatch.go), and the
// driver only says how the ledger's statements travel (pipelined with
// BEGIN and COMMIT, or one at a time) and what transaction the body gets.
// The interfaces below are all the protocol knows of a driver.
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

// stmts is what the protocol sends one statement at a time on: a pool, a
// connection, a transaction, or a ledgerTx.
type stmts interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ledgerTx carries the ledger statements of one atomic call on its
// transaction: an attempt's own transaction (Atomic), or a savepoint in the
// caller's (AtomicInTx).
type ledgerTx interface {
	// QueryRow and Exec run one statement on the open transaction.
	stmts

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
