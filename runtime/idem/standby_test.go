package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// standbyEnv is a primary with a synchronous streaming standby, the ledger
// and the test tables on the primary, and a store whose pool sees the
// server's notices through idem.NoticeHandler.
type standbyEnv struct {
	cluster *pgserver.Cluster
	pool    *pgxpool.Pool
	store   *idem.Store
	p       path         // the store's kind
	runs    atomic.Int64 // bodies run, every mode
}

func newStandbyEnv(t *testing.T, p path) *standbyEnv {
	t.Helper()
	ctx := context.Background()
	c, err := pgserver.StartCluster(ctx, pgserver.ClusterConfig{Standbys: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	require.NoError(t, c.Synchronous(ctx, "on"))
	ledger, err := idem.LedgerSchema(idem.DefaultTable)
	require.NoError(t, err)
	require.NoError(t, c.Primary.Exec(ctx, append(append(ledger.DDL(), paymentsDDL), ordersDDL(t)...)...))

	cfg, err := pgxpool.ParseConfig(c.Primary.URL("postgres"))
	require.NoError(t, err)
	cfg.ConnConfig.OnNotice = idem.NoticeHandler(cfg.ConnConfig.OnNotice)
	cfg.MinConns, cfg.MaxConns = 4, 8 // connections ready: no call waits to dial
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The finalise timeout is what cuts a COMMIT short once its caller has
	// gone (leaveWhenWaiting).
	db := &idemtest.DB{Pool: pool, SQL: stdlib.OpenDBFromPool(pool)}
	t.Cleanup(func() { _ = db.SQL.Close() })
	store, err := p.newStore(db, idem.WithFinaliseTimeout(time.Second))
	require.NoError(t, err)
	return &standbyEnv{cluster: c, pool: pool, store: store, p: p}
}

// leaveWhenWaiting runs call and cancels its context, as a caller that gives
// up does, once a backend waits for the synchronous standby (none waits
// when it starts). It returns call's error.
func (e *standbyEnv) leaveWhenWaiting(t *testing.T, ctx context.Context, call func(context.Context) error) error {
	t.Helper()
	e.waitWaiters(t, func(n int) bool { return n == 0 })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Millisecond):
		}
		if e.waiters(t) > 0 || time.Now().After(deadline) {
			cancel()
			return <-done
		}
	}
}

// waiters counts the backends that wait for the synchronous standby.
func (e *standbyEnv) waiters(t *testing.T) int {
	t.Helper()
	return e.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
}

// waitWaiters waits until the number of backends waiting for the standby
// satisfies ok.
func (e *standbyEnv) waitWaiters(t *testing.T, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok(e.waiters(t)) {
		require.True(t, time.Now().Before(deadline), "backends waiting for the standby did not settle")
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *standbyEnv) atomic(ctx context.Context) (Receipt, error) {
	return e.p.atomic(ctx, e.store, chargeMethod(), fp("1"), func(ctx context.Context, q stmts) (Receipt, error) {
		e.runs.Add(1)
		return chargeOn(100)(ctx, q)
	})
}

// inline's body runs on every call (its INSERT is the claim): its effects
// are counted in the orders table.
func (e *standbyEnv) inline(ctx context.Context) (Order, error) {
	return e.p.inline(ctx, e.store, ordersMethod(), fp("book"), createOrderOn("book", 1))
}

func (e *standbyEnv) external(ctx context.Context, inBody, release chan struct{}) (Payout, error) {
	return idem.External(ctx, e.store, payoutMethod(), payFp("100"), func(context.Context) (Payout, error) {
		e.runs.Add(1)
		if inBody != nil {
			close(inBody)
			<-release
		}
		return Payout{Ref: "tr-1", Amount: 100}, nil
	})
}

// count returns the rows of a query's count on the primary.
func (e *standbyEnv) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), query).Scan(&n))
	return n
}

// A COMMIT that waits for a stopped synchronous standby is committed on the
// primary, and visible there once its wait ends, but not replicated: the
// caller is told the outcome is unknown (never success), whether the wait
// was cut by the finalise timeout after the caller left or cancelled by
// someone else (the server's warning); a retry (marked, so it looks up
// first) while the standby is still away is refused (never the stored
// success) and runs nothing again; once
// the standby is back and has the rows, the retry replays them.
func TestCommitNotReplicatedIsNeverSuccess(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) { testCommitNotReplicated(t, p) })
	}
}

func testCommitNotReplicated(t *testing.T, p path) {
	e := newStandbyEnv(t, p)
	ctx := context.Background()
	// Every call ends with the test (t.Context), so none can hold a
	// connection the pool's Close would wait for.
	keyed := func(key string) context.Context { return idem.ContextWithKey(t.Context(), key) }

	// External: the claim commits while the standby is there; it stops
	// while the body runs, so the outcome's write waits for it.
	inBody, release := make(chan struct{}), make(chan struct{})
	extDone := make(chan error, 1)
	go func() {
		_, err := e.external(keyed("external"), inBody, release)
		extDone <- err
	}()
	<-inBody
	require.NoError(t, e.cluster.Standbys[0].Kill(ctx))
	close(release)
	require.ErrorIs(t, <-extDone, idem.ErrOutcomeNotRecorded, "external")

	// Atomic and inline: the caller leaves while the COMMIT waits; the
	// finalise timeout then cuts it short.
	err := e.leaveWhenWaiting(t, keyed("atomic"), func(ctx context.Context) error { _, err := e.atomic(ctx); return err })
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded, "atomic")
	err = e.leaveWhenWaiting(t, keyed("inline"), func(ctx context.Context) error { _, err := e.inline(ctx); return err })
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded, "inline")

	// The server's warning: the wait is cancelled by someone else before
	// the finalise timeout, and the COMMIT itself reports success.
	warned := make(chan error, 1)
	e.waitWaiters(t, func(n int) bool { return n == 0 }) // the earlier calls' backends are done
	go func() { _, err := e.atomic(keyed("warned")); warned <- err }()
	e.cancelSyncRepWait(t)
	require.ErrorIs(t, <-warned, idem.ErrOutcomeNotRecorded, "a COMMIT the server warned about")

	// Every one of those rows is on the primary: a replay without the
	// confirmation would have answered success.
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM payments`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM orders WHERE idempotency_key = 'inline'`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM idempotency_keys WHERE key = 'external' AND status = 'done'`))
	runs := e.runs.Load()
	require.EqualValues(t, 3, runs)

	retries := map[string]func(context.Context) error{
		"atomic":   func(ctx context.Context) error { _, err := e.atomic(ctx); return err },
		"warned":   func(ctx context.Context) error { _, err := e.atomic(ctx); return err },
		"inline":   func(ctx context.Context) error { _, err := e.inline(ctx); return err },
		"external": func(ctx context.Context) error { _, err := e.external(ctx, nil, nil); return err },
	}
	for key, retry := range retries {
		rctx, o := idem.ContextWithOutcome(idem.ContextWithRetry(keyed(key)))
		err := e.leaveWhenWaiting(t, rctx, retry)
		require.ErrorIs(t, err, idem.ErrStore, "%s: a retry while the standby is away is refused", key)
		assert.False(t, o.Replayed(), key)
	}
	assert.Equal(t, runs, e.runs.Load(), "no body ran again")

	require.NoError(t, e.cluster.Standbys[0].Start(ctx))
	require.NoError(t, e.cluster.Synchronous(ctx, "on"))
	for key, retry := range retries {
		rctx, o := idem.ContextWithOutcome(idem.ContextWithRetry(keyed(key)))
		require.NoError(t, retry(rctx), "%s: replayed once the standby has the row", key)
		assert.True(t, o.Replayed(), key)
	}
	assert.Equal(t, runs, e.runs.Load(), "no body ran again")
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM payments`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM orders WHERE idempotency_key = 'inline'`))
}

// cancelSyncRepWait waits for a backend of the test's pool to wait for the
// synchronous standby and cancels that wait, as an operator's
// pg_cancel_backend does.
func (e *standbyEnv) cancelSyncRepWait(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
			WHERE wait_event = 'SyncRep' AND pid <> pg_backend_pid()`).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no backend waited for the synchronous standby")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
