package idem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestStoreDownFailsClosed(t *testing.T) {
	ctx := context.Background()
	// A pool whose server does not exist: nothing listens on this socket.
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=1 user=nobody dbname=none connect_timeout=1", t.TempDir()))
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	s, err := idem.NewStore(pool)
	require.NoError(t, err)

	var ran atomic.Int64
	_, err = idem.Atomic(keyed("k"), s, chargeMethod(), fp("1"), func(context.Context, pgx.Tx) (Receipt, error) {
		ran.Add(1)
		return Receipt{}, nil
	})
	require.ErrorIs(t, err, idem.ErrStore)
	_, err = idem.External(keyed("k"), s, chargeMethod(), fp("1"), func(context.Context) (Receipt, error) {
		ran.Add(1)
		return Receipt{}, nil
	})
	require.ErrorIs(t, err, idem.ErrStore)
	assert.Zero(t, ran.Load(), "the body never runs without a claim")
}

func TestNewStoreRejectsUnsafeTable(t *testing.T) {
	db := idemtest.New(t)
	for _, name := range []string{`x"; DROP TABLE y; --`, "Upper", "a.b.c", "", "1abc"} {
		_, err := idem.NewStore(db.Pool, idem.WithTable(name))
		assert.Error(t, err, name)
	}
	_, err := idem.NewStore(db.Pool, idem.WithTable("billing.idem_keys"))
	require.NoError(t, err)
}

func TestCustomTable(t *testing.T) {
	db := idemtest.New(t, idemtest.WithTable("billing.ledger"), idemtest.WithSetup(paymentsDDL))
	s, err := idem.NewStore(db.Pool, idem.WithTable("billing.ledger"))
	require.NoError(t, err)
	_, err = idem.Atomic(keyed("k"), s, chargeMethod(), fp("1"), charge(1))
	require.NoError(t, err)
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM billing.ledger`).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestSweepDeletesExactlyExpiredInBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	short := &idem.Method[Receipt]{Name: "Test.Short", Retention: time.Minute}
	for i := range 10 {
		_, err := idem.Atomic(keyed(fmt.Sprintf("short-%d", i)), e.store, short, fp("x"), charge(1))
		require.NoError(t, err)
	}
	for i := range 5 {
		require.NoError(t, e.call(keyed(fmt.Sprintf("long-%d", i)), "x", 1).err)
	}
	n, err := e.store.Sweep(ctx, 3)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is deleted before its expires_at")

	e.clock.Advance(time.Minute)
	// Live claims continue while the sweep runs.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			assert.NoError(t, e.call(keyed(fmt.Sprintf("live-%d", i)), "x", 1).err)
		}
	}()
	n, err = e.store.Sweep(ctx, 3)
	wg.Wait()
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	assert.Equal(t, int64(4), e.swept.Load(), "10 rows in batches of 3: 3+3+3+1")
	assert.Equal(t, 25, e.count(t, "idempotency_keys"))
	var expired int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE method = 'Test.Short'`).Scan(&expired))
	assert.Zero(t, expired)
}

func TestJanitorRunsUntilCancelled(t *testing.T) {
	e := newEnv(t)
	short := &idem.Method[Receipt]{Name: "Test.Short", Retention: time.Minute}
	_, err := idem.Atomic(keyed("j"), e.store, short, fp("x"), charge(1))
	require.NoError(t, err)
	e.clock.Advance(2 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.store.Janitor(ctx, 10*time.Millisecond, 100) }()
	require.Eventually(t, func() bool { return e.count(t, "idempotency_keys") == 0 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
