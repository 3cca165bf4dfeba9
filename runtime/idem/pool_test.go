package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// countingPool wraps a pool the way an instrumented pool does: every call
// goes through it and is counted. It has no Config method.
type countingPool struct {
	inner                  *pgxpool.Pool
	acquires, execs, reads atomic.Int64
}

func (p *countingPool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	p.acquires.Add(1)
	return p.inner.Acquire(ctx)
}

func (p *countingPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.execs.Add(1)
	return p.inner.Exec(ctx, sql, args...)
}

func (p *countingPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	p.reads.Add(1)
	return p.inner.QueryRow(ctx, sql, args...)
}

// TestWrappedPool runs both modes through a wrapped pool: the store uses the
// wrapper for every database call, runs each body once and replays.
func TestWrappedPool(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL))
	pool := &countingPool{inner: db.Pool}
	s, err := idem.NewStore(pool)
	require.NoError(t, err)
	assert.Same(t, pool, s.Pool())

	first, err := idem.Atomic(keyed("atomic"), s, chargeMethod(), fp("1"), charge(100))
	require.NoError(t, err)
	again, err := idem.Atomic(keyed("atomic"), s, chargeMethod(), fp("1"), charge(100))
	require.NoError(t, err)
	assert.Equal(t, first, again, "the retry replays")
	assert.Positive(t, pool.acquires.Load(), "atomic attempts acquire through the wrapper")

	runs := 0
	body := func(context.Context) (Receipt, error) { runs++; return Receipt{PaymentID: 7}, nil }
	acquires := pool.acquires.Load()
	_, err = idem.External(keyed("external"), s, chargeMethod(), fp("1"), body)
	require.NoError(t, err)
	_, err = idem.External(keyed("external"), s, chargeMethod(), fp("1"), body)
	require.NoError(t, err)
	assert.Equal(t, 1, runs, "the external body ran once")
	// The claim and the outcome are written on a connection acquired
	// through the wrapper (the runtime inspects that connection after the
	// commit); the replay's read goes through its QueryRow.
	assert.Greater(t, pool.acquires.Load(), acquires+1, "the external claim and outcome go through the wrapper")
	assert.Positive(t, pool.reads.Load(), "the external read goes through the wrapper")

	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
	assert.Equal(t, 1, n, "one payment")
}

// TestTransactionPooling checks NewStore's refusal of the query modes that
// keep prepared statements on a server connection, and runs both modes in
// each accepted query mode against the database.
func TestTransactionPooling(t *testing.T) {
	modes := map[pgx.QueryExecMode]bool{ // accepted behind a transaction-mode pooler
		pgx.QueryExecModeCacheStatement: false,
		pgx.QueryExecModeDescribeExec:   false,
		pgx.QueryExecModeCacheDescribe:  true,
		pgx.QueryExecModeExec:           true,
		pgx.QueryExecModeSimpleProtocol: true,
	}
	for mode, ok := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			db := idemtest.New(t, idemtest.WithSetup(paymentsDDL), idemtest.WithPoolConfig(func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
			}))
			_, err := idem.NewStore(db.Pool)
			require.NoError(t, err, "without the option every mode is accepted")

			s, err := idem.NewStore(db.Pool, idem.WithTransactionPooling())
			if !ok {
				require.Error(t, err)
				assert.Contains(t, err.Error(), mode.String())
				assert.Contains(t, err.Error(), "pgx.QueryExecModeExec (default_query_exec_mode=exec in the connection string)")
				return
			}
			require.NoError(t, err)
			first, err := idem.Atomic(keyed("atomic"), s, chargeMethod(), fp("1"), charge(100))
			require.NoError(t, err)
			again, err := idem.Atomic(keyed("atomic"), s, chargeMethod(), fp("1"), charge(100))
			require.NoError(t, err)
			assert.Equal(t, first, again, "the retry replays")
			_, err = idem.External(keyed("external"), s, chargeMethod(), fp("1"), func(context.Context) (Receipt, error) {
				return Receipt{PaymentID: 7, Tags: []string{"x"}}, nil
			})
			require.NoError(t, err)
			got, err := idem.External(keyed("external"), s, chargeMethod(), fp("1"), func(context.Context) (Receipt, error) {
				return Receipt{}, nil
			})
			require.NoError(t, err)
			assert.Equal(t, Receipt{PaymentID: 7, Tags: []string{"x"}}, got, "the external call replays")
		})
	}

	// A pool that cannot show its configuration cannot be checked.
	db := idemtest.New(t)
	_, err := idem.NewStore(&countingPool{inner: db.Pool}, idem.WithTransactionPooling())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Config() *pgxpool.Config method")
	_, err = idem.NewStore((*pgxpool.Pool)(nil))
	assert.Error(t, err, "a nil pool")
}

// TestREADMEPgBouncer runs the README's PgBouncer snippet: a pool in exec
// mode, accepted with WithTransactionPooling, serving a call.
func TestREADMEPgBouncer(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL))
	ctx, databaseURL := t.Context(), db.URL
	open := func() (*pgxpool.Pool, *idem.Store, error) {
		cfg, err := pgxpool.ParseConfig(databaseURL)
		if err != nil {
			return nil, nil, err
		}
		// PgBouncer in transaction mode: no statements prepared on the server.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		store, err := idem.NewStore(pool, idem.WithTransactionPooling())
		if err != nil {
			return nil, nil, err
		}
		return pool, store, nil
	}
	pool, store, err := open()
	require.NoError(t, err)
	defer pool.Close()
	_, err = idem.Atomic(keyed("k"), store, chargeMethod(), fp("1"), charge(100))
	require.NoError(t, err)
}
