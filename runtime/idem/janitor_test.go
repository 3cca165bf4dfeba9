package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestStartJanitor refuses a bad interval before starting anything, and
// otherwise sweeps at once and stops with its context.
func TestStartJanitor(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL))
	clock := idemtest.NewClock(time.Time{})
	swept := make(chan int64, 1)
	s, err := idem.NewStore(db.Pool, idem.WithClock(clock.Now), idem.WithHooks(idem.Hooks{
		Swept: func(_ context.Context, e idem.Event) { swept <- e.Rows },
	}))
	require.NoError(t, err)

	for _, interval := range []time.Duration{0, -time.Second} {
		stopped, err := s.StartJanitor(t.Context(), interval, 0)
		require.Error(t, err, interval)
		assert.Contains(t, err.Error(), "interval must be positive")
		assert.Nil(t, stopped)
	}

	_, err = idem.Atomic(keyed("k"), s, chargeMethod(), fp("1"), charge(100))
	require.NoError(t, err)
	clock.Advance(retention + time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	stopped, err := s.StartJanitor(ctx, time.Hour, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), <-swept, "the first sweep runs at once")
	cancel()
	<-stopped
}

// One janitor sweeps the ledger and every registered inline method: expired
// ledger rows are deleted, expired inline keys taken off their rows, and live
// keys of both kinds stay.
func TestJanitorSweepsLedgerAndInlineMethods(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(append([]string{paymentsDDL}, ordersDDL(t)...)...))
	swept := make(chan string, 16)
	s, err := idem.NewStore(db.Pool, idem.WithHooks(idem.Hooks{
		Swept: func(_ context.Context, e idem.Event) { swept <- e.Method },
	}))
	require.NoError(t, err)
	om := ordersMethod()
	idem.RegisterInline(s, om)
	idem.RegisterInline(s, ordersMethod()) // registering again is a no-op
	assert.Equal(t, []string{om.Name}, s.InlineRegistered())

	ctx := t.Context()
	for _, k := range []string{"old", "new"} {
		_, err = idem.Atomic(keyed(k), s, chargeMethod(), fp(k), charge(1))
		require.NoError(t, err)
		_, err = idem.Inline(keyed(k), s, om, fp(k), orderByKey, createOrder(k, 1))
		require.NoError(t, err)
	}
	_, err = db.Pool.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'old'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE orders SET idempotency_claimed_at = now() - interval '2 hours' WHERE idempotency_key = 'old'`)
	require.NoError(t, err)

	jctx, cancel := context.WithCancel(ctx)
	stopped, err := s.StartJanitor(jctx, time.Hour, 0)
	require.NoError(t, err)
	assert.Equal(t, "", <-swept, "the ledger is swept first")
	assert.Equal(t, om.Name, <-swept, "then the inline method, in the same round")
	cancel()
	<-stopped

	var ledgerKeys, orderKeys []string
	rows, err := db.Pool.Query(ctx, `SELECT key FROM idempotency_keys`)
	require.NoError(t, err)
	ledgerKeys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	rows, err = db.Pool.Query(ctx, `SELECT idempotency_key FROM orders WHERE idempotency_key IS NOT NULL`)
	require.NoError(t, err)
	orderKeys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, ledgerKeys)
	assert.Equal(t, []string{"new"}, orderKeys)
}

// A service whose methods are all inline has no ledger table: SweepAll
// sweeps the inline methods and does not report the missing ledger. Without
// any inline method registered, the missing table is an error as before.
func TestSweepAllWithoutLedger(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(t)...))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	_, err = s.SweepAll(t.Context(), 0)
	require.Error(t, err, "no inline method registered: the missing ledger is reported")

	om := ordersMethod()
	idem.RegisterInline(s, om)
	_, err = idem.Inline(keyed("k"), s, om, fp("k"), orderByKey, createOrder("k", 1))
	require.NoError(t, err)
	_, err = db.Pool.Exec(t.Context(), `UPDATE orders SET idempotency_claimed_at = now() - interval '2 hours' WHERE idempotency_key IS NOT NULL`)
	require.NoError(t, err)
	n, err := s.SweepAll(t.Context(), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// A method whose table name is not a safe identifier fails its sweep with an
// error naming it, and the other sweeps of the round still run.
func TestRegisterInlineBadTableFailsItsSweep(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(ordersDDL(t)...))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	idem.RegisterInline(s, &idem.InlineMethod[Order]{Name: "Bad", Table: `orders"; drop`})
	om := ordersMethod()
	idem.RegisterInline(s, om)
	_, err = idem.Inline(keyed("k"), s, om, fp("k"), orderByKey, createOrder("k", 1))
	require.NoError(t, err)
	_, err = db.Pool.Exec(t.Context(), `UPDATE orders SET idempotency_claimed_at = now() - interval '2 hours' WHERE idempotency_key IS NOT NULL`)
	require.NoError(t, err)
	n, err := s.SweepAll(t.Context(), 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Bad")
	assert.Equal(t, int64(1), n, "the valid method was swept all the same")
}
