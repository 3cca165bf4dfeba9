package idem_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// tripCounter counts the round trips a pool makes: every query and every
// batch (pipelined statements travel together). Statement preparation is not
// counted: callers warm the statement cache first. A ROLLBACK is counted
// apart, since a replay sends it after the caller has its answer.
//
// Benchmarks report it per operation: a figure that, unlike time, the
// machine's load cannot change.
type tripCounter struct{ n, rollbacks atomic.Int64 }

func (r *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(d.SQL, "rollback") {
		r.rollbacks.Add(1)
	} else {
		r.n.Add(1)
	}
	return ctx
}

func (r *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// option installs the counter on the pool idemtest.New makes.
func (r *tripCounter) option() idemtest.Option {
	return idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = r })
}

// report starts counting from now and reports round trips per operation on
// the caller's path when the benchmark ends.
func (r *tripCounter) report(b *testing.B) {
	b.Helper()
	start := r.n.Load()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(r.n.Load()-start)/float64(b.N), "roundtrips/op")
		}
	})
}

// count returns the round trips fn makes on the caller's path.
func (r *tripCounter) count(fn func()) int64 {
	start := r.n.Load()
	fn()
	return r.n.Load() - start
}

// TestRoundTrips pins the round trips of the claimed and replayed paths for
// the same work (one INSERT). A first attempt does not look its key up:
// BEGIN and the key's lock travel with the INSERT, the record with COMMIT,
// two round trips, one fewer than the work alone sent as pgx's Begin sends
// it (BEGIN alone, the INSERT, COMMIT) and the claim's floor
// (TestFloorRoundTrips). A retry marked idem.ContextWithRetry is answered
// by its lookup, one round trip (the ROLLBACK is sent after the caller has
// its answer); an unmarked one costs the work's: the body's transaction,
// whose record the key's row refuses, then the lookup (the ROLLBACK
// between them is counted apart).
func TestRoundTrips(t *testing.T) {
	var rt tripCounter
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL), rt.option(),
		// One connection, so its statement cache is warm after the first calls.
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.MaxConns = 1 }))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := chargeMethod()
	ctx := context.Background()
	plain := func() {
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = charge(1)(ctx, tx)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	atomicCall := func(ctx context.Context, replay bool) func() {
		return func() {
			ctx, o := idem.ContextWithOutcome(ctx)
			_, err := idem.Atomic(ctx, s, m, fp("1"), charge(1))
			require.NoError(t, err)
			require.Equal(t, replay, o.Replayed(), "replayed")
		}
	}
	first := func(key string) func() { return atomicCall(keyed(key), false) }
	retry := func(key string) func() { return atomicCall(idem.ContextWithRetry(keyed(key)), true) }
	unmarked := func(key string) func() { return atomicCall(keyed(key), true) }
	// Warm the statement caches: preparing is a round trip of its own.
	plain()
	first("warm")()
	retry("warm")()
	unmarked("warm")()

	work := rt.count(plain)
	require.EqualValues(t, 3, work, "the work alone: BEGIN, INSERT, COMMIT")
	for i := range 3 {
		key := fmt.Sprintf("k%d", i)
		idem.ForgetReplays(s) // the unmarked retries are taken for first attempts
		require.EqualValues(t, 2, rt.count(first(key)), "a first attempt: BEGIN with the key's lock and the INSERT, the record with COMMIT")
		require.EqualValues(t, 1, rt.count(retry(key)), "a marked retry is its lookup")
		rollbacks := rt.rollbacks.Load()
		require.Equal(t, work, rt.count(unmarked(key)), "an unmarked retry: the body's two, then the lookup")
		require.EqualValues(t, 1, rt.rollbacks.Load()-rollbacks, "an unmarked retry rolls its body's work back before the lookup")
	}
}
