package idem

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// A driver is how the protocol reaches PostgreSQL through one kind of
// database handle. TTx is the transaction a method's body takes: pgx.Tx
// (pgxDriver, pgxdriver.go: a store made by NewStore) or *sql.Tx
// (sqlDriver, sqldriver.go: a store made by NewSQLStore). The entry points
// (Atomic, AtomicInTx, Inline, InlineInTx) are written once over it: the
// store's driver is chosen when the store is made, a body whose transaction
// is not the driver's is refused (driverFor, dispatch.go), and the driver
// only says how the ledger's statements travel (pipelined with
// BEGIN and COMMIT, or one at a time) and what transaction the body gets.
// The interfaces below, and the executor (executor.go), are all the
// protocol knows of a driver.
type driver[TTx any] interface {
	// attempt opens an attempt on one of the store's connections: the
	// lookup runs on t outside any transaction; tx is the transaction the
	// body gets, opened by t.open; and bodyEnded reports a body that
	// committed or rolled back tx itself where the driver can see it.
	attempt(ctx context.Context, s *Store, c call) (t attemptTx, tx func() TTx, bodyEnded func() bool, err error)
	// inTx carries the protocol's statements in the caller's transaction
	// tx, the body's under a savepoint: body is the transaction the body
	// gets (the savepoint travels with its first statement where the
	// driver can queue it), bodyEnded as in attempt.
	inTx(s *Store, c call, tx TTx) (t ledgerTx, body TTx, bodyEnded func() bool)
}

// ledgerTx carries the ledger statements of one atomic call: the lookup,
// then the body's transaction, which either ends with the record
// statement (finish) or is rolled back (abandon). It is an attempt's own
// connection (Atomic: the lookup in autocommit, the body in a transaction)
// or the caller's transaction (AtomicInTx: the body under a savepoint).
type ledgerTx interface {
	// QueryRow and Exec run one statement outside the body's transaction
	// (before open, or after abandon): the lookup.
	stmts

	// open opens the body's transaction (BEGIN, or a SAVEPOINT) and
	// takes the key's lock where the driver cannot queue them with the
	// body's first statement (database/sql); on pgx it does nothing.
	open(ctx context.Context) error
	// finish sends the prelude's statements (none but on Citus: SET
	// LOCAL statements, without parameters), stmt, then the end of the
	// body's transaction (COMMIT, or RELEASE SAVEPOINT), after its
	// opening if the body sent nothing, in one round trip where the
	// driver pipelines, and returns the end's command tag. stmt's failure
	// is returned through stmtErr (refusedRecord tells the record
	// statement's refusal).
	finish(ctx context.Context, prelude []string, stmt string, args []any) (endTag string, err error)
	// abandon rolls the body's transaction back, if it was opened, so
	// that a lookup can follow: the connection, or the caller's
	// transaction, is usable again.
	abandon(ctx context.Context) error
	// keyWaitEnded reports whether the key's lock (keylock.go), taken
	// first in the body's transaction, waited out the claim wait.
	keyWaitEnded() bool
}

// attemptTx is a ledgerTx on a connection the attempt owns: it also knows
// the connection (for the server's notices), how the COMMIT is bounded, and
// how the attempt ends.
type attemptTx interface {
	ledgerTx
	// commitContext is the context the record statement and COMMIT run
	// under (see Store.commitContext).
	commitContext(ctx context.Context, s *Store) (context.Context, context.CancelFunc)
	// pgConn is the connection, whose notices say whether a COMMIT
	// reached the synchronous standby (NoticeHandler).
	pgConn() *pgconn.PgConn
	// confirmReplay confirms that every row committed before is on the
	// synchronous standby, outside any transaction (confirmReplication).
	confirmReplay(ctx context.Context, s *Store, c call) error
	// done ends the attempt: rolls back a transaction still open (an
	// error, or a panic on its way up) and gives the connection back.
	done(ctx context.Context, s *Store)
}
