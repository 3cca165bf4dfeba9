package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is what a Store needs of a connection pool: a connection for an
// atomic attempt's transaction, and single statements for the external
// mode's claim, steps and outcome. *pgxpool.Pool satisfies it, and so does a
// type that wraps one, to instrument or log it, as long as Acquire hands out
// the underlying pool's connections.
type Pool interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var _ Pool = (*pgxpool.Pool)(nil)

// NewStore returns a Store over pool (a *pgxpool.Pool, or a type wrapping
// one). It fails only on invalid options. For a *sql.DB, see NewSQLStore.
func NewStore(pool Pool, opts ...Option) (*Store, error) {
	if p, ok := pool.(*pgxpool.Pool); pool == nil || ok && p == nil {
		return nil, errors.New("idem: NewStore: nil pool")
	}
	s, err := newStore(opts, func(cfg config) error {
		if cfg.txPooling {
			return checkPooling(pool)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idem: NewStore: %w", err)
	}
	s.pool, s.exec, s.drv = pool, pgxExecutor{pgxStmts: pgxStmts{pool}, pool: pool}, pgxDriver{}
	return s, nil
}

// Pool returns the pool the store uses: nil for a store made by
// NewSQLStore (see DB).
func (s *Store) Pool() Pool { return s.pool }

// pgxExecutor is the executor of a store made by NewStore: single
// statements on the pool, and a connection acquired from it for withConn.
type pgxExecutor struct {
	pgxStmts
	pool Pool
}

var _ executor = pgxExecutor{}

func (e pgxExecutor) withConn(ctx context.Context, fn func(q stmts, pc *pgconn.PgConn) error) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return fn(pgxStmts{conn}, conn.Conn().PgConn())
}

// pgxQuerier is what pgx's pools, connections and transactions send single
// statements with.
type pgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pgxStmts sends the protocol's statements on a pgx pool, connection or
// transaction, with the runtime's row and command tag.
type pgxStmts struct{ q pgxQuerier }

var _ stmts = pgxStmts{}

// QueryRow runs one statement that returns a row.
func (p pgxStmts) QueryRow(ctx context.Context, sql string, args ...any) row {
	return p.q.QueryRow(ctx, sql, args...)
}

// Exec runs one statement and returns the rows it affected.
func (p pgxStmts) Exec(ctx context.Context, sql string, args ...any) (cmdTag, error) {
	tag, err := p.q.Exec(ctx, sql, args...)
	return cmdTag{rows: tag.RowsAffected()}, err
}

// checkPooling refuses a pool whose query mode cannot work behind a
// transaction-mode pooler.
func checkPooling(pool Pool) error {
	p, ok := pool.(interface{ Config() *pgxpool.Config })
	if !ok {
		return fmt.Errorf("WithTransactionPooling: cannot check the query mode of a %T: it has no Config() *pgxpool.Config method", pool)
	}
	switch mode := p.Config().ConnConfig.DefaultQueryExecMode; mode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe:
		return nil
	default:
		return fmt.Errorf("WithTransactionPooling: the pool's query mode %s keeps prepared statements on a server connection the pooler may swap; "+
			"set ConnConfig.DefaultQueryExecMode to pgx.QueryExecModeExec (default_query_exec_mode=exec in the connection string), "+
			"pgx.QueryExecModeSimpleProtocol or pgx.QueryExecModeCacheDescribe", mode)
	}
}
