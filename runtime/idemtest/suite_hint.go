package idemtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// The scenarios of a retry nothing marks (idem.ContextWithRetry): an
// atomic call is taken for a first attempt and does not look its key up
// before its body, so a retry's body runs, the key's row refuses its
// record, its work rolls back, and the row answers. The answer is the one
// a lookup first would have given; only the body's runs differ.

// stormRetries is how many unmarked retries the retry storm sends: enough
// for the store to turn its calls to lookups first (a quarter of the
// method's recent calls replays: ten in a row), and as many again to see
// it hold.
const stormRetries = 30

// stormQuiet is how many of the storm's last retries must not run their
// bodies.
const stormQuiet = 10

// retry: a retry of a finished call replays the first answer, with the
// effects once. Marked idem.ContextWithRetry, it is answered by the key's
// lookup without running its body; without the mark its body ran (the
// call was taken for a first attempt), the key's row refused its record,
// and its work rolled back.
func (l ledgerSuite[S, W, A, R]) retry(marked bool) func(*testing.T) {
	return func(t *testing.T) {
		e, _, w := l.setup(t)
		a := l.sample(t)
		key, what, executions := "unmarked", "a retry without the mark", int64(2)
		if marked {
			key, what, executions = "marked", "a retry with the mark", 1
		}
		ctx := l.ctx(t, key, "", false)
		first := l.once(t, w, ctx, a, "first request")
		if marked {
			ctx = idem.ContextWithRetry(ctx)
		}
		rctx, o := idem.ContextWithOutcome(ctx)
		again := l.once(t, w, rctx, a, what)
		if !o.Replayed() {
			t.Errorf("%s answered on its own, want a replay of the first answer", what)
		}
		same(t, []result[R]{{resp: first}, {resp: again}}, l.equal)
		e.wantExecutions(t, executions)
		e.wantRows(t, 1)
		e.wantEffects(t, 1)
	}
}

// expiredUnmarked: a call without the mark after the key's retention meets
// the expired row, which refuses its record; the attempt that follows
// looks the key up and takes it over: the method's work happens again.
func (l ledgerSuite[S, W, A, R]) expiredUnmarked(t *testing.T) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	ctx := l.ctx(t, "expiring-unmarked", "", false)
	l.once(t, w, ctx, a, "first request")
	e.clock.Advance(retentionOf(l.method.Retention) + time.Microsecond)
	rctx, o := idem.ContextWithOutcome(ctx)
	l.once(t, w, rctx, a, "the same key after its retention, without the mark")
	if o.Replayed() {
		t.Errorf("the same key after its retention, without the mark, was replayed, want a new run")
	}
	// The first run, the run whose record the expired row refused, and
	// the takeover's.
	e.wantExecutions(t, 3)
	e.wantRows(t, 1)
	e.wantEffects(t, 2)
}

// retryStorm: retries without the mark, one after another, all replay;
// once the method's recent calls were mostly replays, the store looks the
// key up first, so the storm's last retries run no body.
func (l ledgerSuite[S, W, A, R]) retryStorm(t *testing.T) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	ctx := l.ctx(t, "retry-storm", "", false)
	first := l.once(t, w, ctx, a, "first request")
	var quiet int64
	for i := range stormRetries {
		if i == stormRetries-stormQuiet {
			quiet = e.executed.Load()
		}
		rctx, o := idem.ContextWithOutcome(ctx)
		again := l.once(t, w, rctx, a, fmt.Sprintf("retry %d of a storm without the mark", i))
		if !o.Replayed() {
			t.Fatalf("retry %d of a storm without the mark answered on its own, want a replay", i)
		}
		same(t, []result[R]{{resp: first}, {resp: again}}, l.equal)
	}
	if ran := e.executed.Load() - quiet; ran != 0 {
		t.Errorf("the last %d retries of a storm without the mark ran %d bodies, want 0: the store looks the key up first once a method's calls are mostly replays",
			stormQuiet, ran)
	}
	e.wantRows(t, 1)
	e.wantEffects(t, 1)
}

// unmarkedScenarios runs the scenarios above (atomic mode only: external
// mode claims the key before its body whatever the mark).
func (l ledgerSuite[S, W, A, R]) unmarkedScenarios(t *testing.T) {
	t.Run("retry without the mark", l.retry(false))
	t.Run("retry with the mark", l.retry(true))
	t.Run("expired key without the mark", l.expiredUnmarked)
	t.Run("retry storm without the mark", l.retryStorm)
}
