package idem

import (
	"context"
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

// WithTransactionPooling says that the pool's connections go through a pooler
// in transaction mode (PgBouncer's pool_mode = transaction, or one like it),
// where consecutive transactions of one client connection may run on
// different server connections. NewStore then refuses a pool whose default
// query mode keeps prepared statements on the server connection
// (pgx.QueryExecModeCacheStatement, pgx's default, and
// pgx.QueryExecModeDescribeExec): a statement prepared on one server
// connection is missing on the next. pgx.QueryExecModeExec,
// pgx.QueryExecModeSimpleProtocol and pgx.QueryExecModeCacheDescribe work.
//
// A pooler that keeps prepared statements itself (PgBouncer 1.21 or later
// with max_prepared_statements above 0) needs no such restriction: leave the
// option out for it.
//
// The check reads the pool's configuration through its Config method
// (*pgxpool.Pool has one); a Pool without one is refused, since its mode
// cannot be checked.
func WithTransactionPooling() Option { return func(c *config) { c.txPooling = true } }

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
