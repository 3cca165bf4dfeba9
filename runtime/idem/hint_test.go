package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Whether an atomic call looks its key up first (hint.go): a first attempt
// does not, a call marked a retry does, and the answer is the same either
// way. The round trips are pinned by TestRoundTripsBothPaths.

// TestPathsRetryMarkedIsAnsweredByTheLookup: a retry marked with
// idem.ContextWithRetry replays without running its body; a first attempt
// so marked (a wrong hint) runs as a first attempt.
func TestPathsRetryMarkedIsAnsweredByTheLookup(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.callOn(p, retried("k"), "100", 100)
			require.NoError(t, first.err)
			assert.False(t, first.replayed, "a marked first attempt runs")
			again := e.callOn(p, retried("k"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.Equal(t, first.r, again.r)
			assert.EqualValues(t, 1, e.executed.Load(), "the retry's body did not run")
			assert.Equal(t, 1, e.count(t, "payments"))
		})
	}
}

// TestPathsRetryUnmarkedReplays: a retry nothing marks is taken for a first
// attempt: its body runs, the key's row refuses its record, the body's
// work rolls back, and the call replays the first answer. The effect
// happens once.
func TestPathsRetryUnmarkedReplays(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.callOn(p, keyed("k"), "100", 100)
			require.NoError(t, first.err)
			assert.False(t, first.replayed)
			for i := range 3 {
				again := e.callOn(p, keyed("k"), "100", 100)
				require.NoError(t, again.err, "retry %d", i)
				assert.True(t, again.replayed, "retry %d", i)
				assert.Equal(t, first.r, again.r, "retry %d: the first answer", i)
			}
			assert.EqualValues(t, 4, e.executed.Load(), "each unmarked retry ran its body")
			assert.EqualValues(t, 3, e.replayed.Load())
			assert.Equal(t, 1, e.count(t, "payments"), "the retries' work rolled back")
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
		})
	}
}

// TestPathsMismatchUnmarked: another request under a used key, unmarked, is
// refused with a *MismatchError once its record is refused; its work
// rolls back and the refusal is recorded.
func TestPathsMismatchUnmarked(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			require.NoError(t, e.callOn(p, keyed("k"), "100", 100).err)
			other := e.callOn(p, keyed("k"), "200", 200)
			var me *idem.MismatchError
			require.ErrorAs(t, other.err, &me)
			assert.Equal(t, fp("100"), me.Stored)
			assert.Equal(t, fp("200"), me.Got)
			assert.False(t, other.replayed)
			assert.EqualValues(t, 1, e.mismatches.Load())
			assert.Equal(t, 1, e.count(t, "payments"), "the refused request's work rolled back")
			require.NoError(t, e.store.Drain(context.Background()))
			_, _, got, _ := lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Equal(t, fp("200"), got, "the refusal is recorded")
		})
	}
}

// TestPathsExpiredKeyUnmarked: an unmarked call on a key whose row expired
// is refused by that row (the fresh record cannot take it over); the
// attempt that follows, at once, looks the key up and takes it over.
func TestPathsExpiredKeyUnmarked(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.callOn(p, keyed("old"), "100", 100)
			require.NoError(t, first.err)
			e.clock.Advance(retention + time.Second)
			again := e.callOn(p, keyed("old"), "200", 200)
			require.NoError(t, again.err, "not a mismatch: the key is new")
			assert.False(t, again.replayed)
			assert.NotEqual(t, first.r.PaymentID, again.r.PaymentID)
			assert.EqualValues(t, 3, e.executed.Load(), "the first, the refused run, the takeover")
			assert.EqualValues(t, 1, e.takenOver.Load())
			assert.Equal(t, 2, e.count(t, "payments"), "the refused run's work rolled back")
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
			// The row is the new request's: a marked retry of it replays.
			r := e.callOn(p, retried("old"), "200", 200)
			require.NoError(t, r.err)
			assert.True(t, r.replayed)
			assert.Equal(t, again.r, r.r)
		})
	}
}

// TestPathsAdaptiveLookupFirst: unmarked retries of one method turn its
// calls to lookups first once a quarter of its recent calls were replays
// (ten replays in a row from none), after which retries no longer run
// their bodies; first attempts turn it back.
func TestPathsAdaptiveLookupFirst(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.callOn(p, keyed("k"), "100", 100)
			require.NoError(t, first.err)
			ran := func(fn func()) int64 {
				before := e.executed.Load()
				fn()
				return e.executed.Load() - before
			}
			retry := func() {
				r := e.callOn(p, keyed("k"), "100", 100)
				require.NoError(t, r.err)
				require.True(t, r.replayed)
				require.Equal(t, first.r, r.r)
			}
			for i := range 10 {
				assert.EqualValues(t, 1, ran(retry), "retry %d runs its body: the rate is %.3f", i, idem.ReplayRate(e.store, e.m.Name))
			}
			require.GreaterOrEqual(t, idem.ReplayRate(e.store, e.m.Name), idem.LookupFirstRate)
			for i := range 20 {
				assert.Zero(t, ran(retry), "retry %d of the storm looks up first", i)
			}
			// First attempts, looked up first meanwhile, bring the rate down.
			n := 0
			for ; idem.ReplayRate(e.store, e.m.Name) >= idem.LookupFirstRate; n++ {
				require.NoError(t, e.callOn(p, keyed("new-"+string(rune('a'+n%26))+string(rune('a'+n/26))), "100", 100).err)
				require.Less(t, n, 100, "first attempts must turn the rate back")
			}
			assert.EqualValues(t, 1, ran(retry), "past the storm, a retry runs its body again")
			assert.Equal(t, 1+n, e.count(t, "payments"), "every replay's work rolled back")
		})
	}
}

// TestWithLookupFirst: a store made WithLookupFirst looks up first for
// every call, so an unmarked retry does not run its body.
func TestWithLookupFirst(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithLookupFirst())
			first := e.callOn(p, keyed("k"), "100", 100)
			require.NoError(t, first.err)
			again := e.callOn(p, keyed("k"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.EqualValues(t, 1, e.executed.Load())
		})
	}
}

func TestContextWithRetry(t *testing.T) {
	ctx := context.Background()
	assert.False(t, idem.RetryFrom(ctx))
	assert.True(t, idem.RetryFrom(idem.ContextWithRetry(ctx)))
}

// inTxOn is one AtomicInTx call on path p in a caller's transaction of its
// own, which goes on after the call (one more statement) and commits.
func (e *env) inTxOn(t *testing.T, p path, ctx context.Context, req string, amount int64) result {
	t.Helper()
	tx, err := p.begin(ctx, e.db)
	require.NoError(t, err)
	defer func() { _ = tx.rollback(context.WithoutCancel(ctx)) }()
	ctx, o := idem.ContextWithOutcome(ctx)
	r, err := p.atomicInTx(ctx, e.store, tx, e.m, fp(req), chargeOn(amount))
	_, werr := tx.queryInt(ctx, `SELECT 1`)
	require.NoError(t, werr, "the caller's transaction is usable after the call")
	require.NoError(t, tx.commit(ctx))
	return result{r, err, o.Replayed()}
}

// TestPathsInTxUnmarkedReplay: in the caller's transaction, an unmarked
// retry runs its body under the savepoint; the key's row refuses the
// record, the work rolls back to the savepoint, and the row answers; a
// marked retry is answered by the lookup without running the body.
func TestPathsInTxUnmarkedReplay(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.inTxOn(t, p, keyed("k"), "100", 100)
			require.NoError(t, first.err)
			assert.False(t, first.replayed)
			again := e.inTxOn(t, p, keyed("k"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.Equal(t, first.r, again.r)
			assert.EqualValues(t, 2, e.executed.Load(), "the unmarked retry ran its body, rolled back")
			marked := e.inTxOn(t, p, retried("k"), "100", 100)
			require.NoError(t, marked.err)
			assert.True(t, marked.replayed)
			assert.Equal(t, first.r, marked.r)
			assert.EqualValues(t, 2, e.executed.Load(), "the marked retry did not run its body")
			other := e.inTxOn(t, p, keyed("k"), "999", 999)
			var mm *idem.MismatchError
			assert.ErrorAs(t, other.err, &mm, "a reused key is a mismatch, found by the refused record")
			assert.Equal(t, 1, e.count(t, "payments"), "the refused runs' work rolled back")
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
		})
	}
}

// TestPathsInTxExpiredKeyUnmarked: in the caller's transaction, an
// unmarked call on a key whose row expired is refused by that row; a
// second run, at once and under a savepoint of its own, looks the key up
// and takes the row over.
func TestPathsInTxExpiredKeyUnmarked(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.inTxOn(t, p, keyed("old"), "100", 100)
			require.NoError(t, first.err)
			e.clock.Advance(retention + time.Second)
			again := e.inTxOn(t, p, keyed("old"), "200", 200)
			require.NoError(t, again.err, "not a mismatch: the key is new")
			assert.False(t, again.replayed)
			assert.NotEqual(t, first.r.PaymentID, again.r.PaymentID)
			assert.EqualValues(t, 3, e.executed.Load(), "the first, the refused run, the takeover")
			assert.EqualValues(t, 1, e.takenOver.Load())
			assert.Equal(t, 2, e.count(t, "payments"), "the refused run's work rolled back")
			r := e.inTxOn(t, p, retried("old"), "200", 200)
			require.NoError(t, r.err)
			assert.True(t, r.replayed)
			assert.Equal(t, again.r, r.r)
		})
	}
}
