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
