package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// NewSQLStore returns a Store over db, for services that reach PostgreSQL
// through database/sql. db must use pgx's database/sql driver,
// github.com/jackc/pgx/v5/stdlib: sql.Open("pgx", dsn), stdlib.OpenDB or
// stdlib.OpenDBFromPool. Any other driver (lib/pq among them) is refused:
// the store reads PostgreSQL's errors as pgx's *pgconn.PgError (the SQLSTATE
// and constraint name that tell a lost claim, a claim wait that ran out, a
// serialization failure) and the server's notices through the pgx
// connection under database/sql (a COMMIT whose wait for a synchronous
// standby was cancelled, see NoticeHandler; install it with stdlib.OpenDB
// and ConnConfig.OnNotice).
//
// A store made here serves AtomicSQL, AtomicSQLInTx, InlineSQL,
// InlineSQLInTx, External, Sweep, SweepInline and the Janitor; Atomic and
// Inline (which take a pgx.Tx) refuse it. It fails only on invalid options.
// WithTransactionPooling is refused: the query mode of a *sql.DB's
// connections cannot be checked (open it with default_query_exec_mode=exec
// in the DSN behind a transaction-mode pooler, and leave the option out).
func NewSQLStore(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("idem: NewSQLStore: nil *sql.DB")
	}
	if _, ok := db.Driver().(*stdlib.Driver); !ok {
		return nil, fmt.Errorf("idem: NewSQLStore: the *sql.DB uses the driver %T, and the store needs pgx's (github.com/jackc/pgx/v5/stdlib), "+
			"whose errors (*pgconn.PgError) and connection notices it reads; the same DSN works with sql.Open(\"pgx\", dsn) "+
			"after import _ \"github.com/jackc/pgx/v5/stdlib\"", db.Driver())
	}
	s, err := newStore(opts, func(cfg config) error {
		if cfg.txPooling {
			return errors.New("WithTransactionPooling: the query mode of a *sql.DB's connections cannot be checked; " +
				"open it with default_query_exec_mode=exec in the DSN and leave the option out")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idem: NewSQLStore: %w", err)
	}
	s.db, s.exec, s.drv = db, sqlExecutor{db: db}, sqlDriver{}
	return s, nil
}

// DB returns the *sql.DB the store uses: nil for a store made by NewStore
// (see Pool).
func (s *Store) DB() *sql.DB { return s.db }

// sqlExecutor is the executor of a store made by NewSQLStore: single
// statements on the *sql.DB, and for withConn one of its connections, whose
// statements go through the pgx connection under it (for its notices).
type sqlExecutor struct{ db *sql.DB }

var _ executor = sqlExecutor{}

// Exec runs one statement. The command tag carries the affected row count.
func (e sqlExecutor) Exec(ctx context.Context, query string, args ...any) (cmdTag, error) {
	res, err := e.db.ExecContext(ctx, query, args...)
	if err != nil {
		return cmdTag{}, err
	}
	return affected(res)
}

// QueryRow runs one statement that returns a row.
func (e sqlExecutor) QueryRow(ctx context.Context, query string, args ...any) row {
	return sqlRow{e.db.QueryRowContext(ctx, query, args...)}
}

func (e sqlExecutor) withConn(ctx context.Context, fn func(q stmts, pc *pgconn.PgConn) error) error {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return rawConn(conn, func(c *pgx.Conn) error { return fn(pgxStmts{c}, c.PgConn()) })
}

// affected is res's affected row count as a command tag.
func affected(res sql.Result) (cmdTag, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return cmdTag{}, err
	}
	return cmdTag{rows: n}, nil
}

// sqlRow is a *sql.Row that reports no row as pgx.ErrNoRows, as the
// protocol expects.
type sqlRow struct{ row *sql.Row }

// Scan reads the row into dest.
func (r sqlRow) Scan(dest ...any) error { return sqlErr(r.row.Scan(dest...)) }

// sqlErr maps database/sql's errors to those the protocol tests for:
// sql.ErrNoRows is pgx.ErrNoRows, and a transaction that the body ended
// (sql.ErrTxDone) is errBodyEndedTx. The driver's own errors
// (*pgconn.PgError) pass through database/sql unchanged.
func sqlErr(err error) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return pgx.ErrNoRows
	case errors.Is(err, sql.ErrTxDone):
		return fmt.Errorf("%w (%w)", errBodyEndedTx, err)
	}
	return err
}

// rawConn runs fn on the pgx connection under conn, which must come from
// pgx's database/sql driver (NewSQLStore checks the driver).
func rawConn(conn *sql.Conn, fn func(*pgx.Conn) error) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("idem: the *sql.DB's connection is a %T, not pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib)", dc)
		}
		return fn(c.Conn())
	})
}
