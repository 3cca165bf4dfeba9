package idem

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// The executor: how the protocol sends a statement of its own, outside an
// attempt's transaction (external mode's claim, steps, outcome, release and
// heartbeat, the Citus statements, the mismatch record, the sweeps, the
// confirmation that a replayed outcome is on the synchronous standby). It is
// chosen once, when the store is made: pgxExecutor over the Pool (NewStore,
// pool.go), sqlExecutor over the *sql.DB (NewSQLStore, sqlstore.go). No
// other code of the protocol reaches the pool or the *sql.DB for a single
// statement.

// row is one row of a statement's answer. No row is pgx.ErrNoRows on
// either driver.
type row interface {
	Scan(dest ...any) error
}

// cmdTag is what the protocol reads of a statement's command tag: the rows
// it affected.
type cmdTag struct{ rows int64 }

// RowsAffected returns the rows the statement affected.
func (t cmdTag) RowsAffected() int64 { return t.rows }

// stmts is what the protocol sends one statement at a time on: the
// executor, a connection, a transaction, or a ledgerTx.
type stmts interface {
	QueryRow(ctx context.Context, sql string, args ...any) row
	Exec(ctx context.Context, sql string, args ...any) (cmdTag, error)
}

// executor is the store's way to its database for statements of their
// own: QueryRow and Exec on any connection, in autocommit.
type executor interface {
	stmts
	// withConn runs fn on one connection, held for fn's duration: q sends
	// statements on it, and pc is its pgx side, whose notices say whether
	// a commit reached the synchronous standby (replication.go).
	withConn(ctx context.Context, fn func(q stmts, pc *pgconn.PgConn) error) error
}
