package idemtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// ledgerSuite holds the scenarios atomic and external methods share: both
// keep their keys in the ledger table.
type ledgerSuite[S, W, A, R any] struct {
	pkg      Package
	store    StoreFunc
	method   *idem.Method[R]
	fp       func(A) []byte
	newSvc   func(*testing.T, *DB) S
	wrap     func(S, *idem.Store) W
	call     func(W, context.Context, A) (R, error)
	sample   func(*testing.T) A
	other    func(*testing.T) A
	effects  func(*testing.T, *DB) int
	storm    int
	equal    func(a, b R) bool // never nil
	external bool
	// keyFromRequest: the wrapper takes the key from the request (-key).
	keyFromRequest bool
	// direct runs the method under the ledger without its wrapper: the
	// body does the work if work is set, then returns fail.
	direct func(ctx context.Context, e *env, svc S, a A, work bool, fail error) (R, error)
}

// setup builds the service (the package's fixture) and its wrapper over a
// fresh database holding the package's migrations.
func (l ledgerSuite[S, W, A, R]) setup(t *testing.T) (*env, S, W) {
	t.Helper()
	e := newEnv(t, l.pkg, l.method.Name, true, l.store)
	svc := l.newSvc(t, e.db)
	e.countEffects(t, l.effects)
	return e, svc, l.wrap(svc, e.store)
}

// ctx is a scenario's context for key in scope; an external twin waits for
// the attempt in progress instead of failing (idem.ContextWithWait).
func (l ledgerSuite[S, W, A, R]) ctx(t *testing.T, key, scope string, wait bool) context.Context {
	ctx := keyCtx(t, key, scope)
	if wait && l.external {
		ctx = idem.ContextWithWait(ctx)
	}
	return ctx
}

// once makes one call that must succeed.
func (l ledgerSuite[S, W, A, R]) once(t *testing.T, w W, ctx context.Context, a A, what string) R {
	t.Helper()
	r, err := l.call(w, ctx, a)
	if err != nil {
		t.Fatalf("%s (key %q; the request from %s must succeed): %v", what, keyOf(ctx), funcName(l.sample), err)
	}
	return r
}

func keyOf(ctx context.Context) string { k, _ := idem.KeyFrom(ctx); return k }

// common runs the scenarios of both ledger modes.
func (l ledgerSuite[S, W, A, R]) common(t *testing.T) {
	n := l.storm
	if n == 0 {
		n = DefaultStorm
	}
	t.Run("twins", l.race(2, "twins"))
	t.Run("storm", l.race(n, "storm"))
	if l.other != nil {
		t.Run("same key, different request", l.mismatch)
	}
	t.Run("distinct keys", func(t *testing.T) { l.twoCalls(t, "key-a", "", "key-b", "") })
	t.Run("same key, two scopes", func(t *testing.T) { l.twoCalls(t, "shared", "tenant-a", "shared", "tenant-b") })
	t.Run("expired key", l.expired)
	t.Run("sweep keeps live keys", l.sweep)
	if l.keyFromRequest {
		t.Run("key from the request", l.requestKey)
	}
}

// requestKey: with no key in the context, the wrapper takes the request's
// key field (-key): a twin with the same field value replays.
func (l ledgerSuite[S, W, A, R]) requestKey(t *testing.T) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	first, err := l.call(w, t.Context(), a)
	if err != nil {
		t.Fatalf("first request without a key in the context (the wrapper takes it from the request's -key field, which the sample from %s must set): %v", funcName(l.sample), err)
	}
	ctx, o := idem.ContextWithOutcome(t.Context())
	twin, err := l.call(w, ctx, l.sample(t))
	if err != nil {
		t.Fatalf("twin without a key in the context: %v", err)
	}
	if !o.Replayed() {
		t.Errorf("twin with the same key field was not replayed")
	}
	same(t, []result[R]{{resp: first}, {resp: twin}}, l.equal)
	e.wantExecutions(t, 1)
	e.wantRows(t, 1)
	e.wantEffects(t, 1)
}

// race: n identical requests released at once: one run's work commits,
// one ledger row, equal responses. External mode runs the body once; in
// atomic mode twins may all run it, and exactly one call's answer is its
// own (every other one's is a replay of it).
func (l ledgerSuite[S, W, A, R]) race(n int, key string) func(*testing.T) {
	return func(t *testing.T) {
		e, _, w := l.setup(t)
		a := l.sample(t)
		ctx := l.ctx(t, key, "", true)
		var fresh atomic.Int64
		race(t, e, n, l.equal, func(i int) (R, error) {
			ctx, o := idem.ContextWithOutcome(Caller(ctx, i))
			r, err := l.call(w, ctx, a)
			if err == nil && !o.Replayed() {
				fresh.Add(1)
			}
			return r, err
		})
		if l.external {
			e.wantExecutions(t, 1)
		} else if got := fresh.Load(); got != 1 {
			t.Errorf("%d of %d calls got an answer of their own, not a replay, want 1: one run's work commits per key", got, n)
		}
		e.wantRows(t, 1)
		e.wantEffects(t, 1)
	}
}

// mismatch: the same key with another request, sent as a retry
// (idem.ContextWithRetry), is refused with idem.ErrMismatch, runs nothing,
// and leaves the refusal's record.
func (l ledgerSuite[S, W, A, R]) mismatch(t *testing.T) {
	e, _, w := l.setup(t)
	ctx := l.ctx(t, "reused", "", false)
	l.once(t, w, ctx, l.sample(t), "first request")
	o := otherRequest(t, l.sample, l.other, l.fp)
	if _, err := l.call(w, idem.ContextWithRetry(ctx), o); !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("same key, different request: got error %v, want idem.ErrMismatch", err)
	}
	e.wantExecutions(t, 1)
	e.wantRows(t, 1)
	e.wantMismatchRecorded(t, "reused", l.fp(o), "same key, different request")
}

// twoCalls: different keys, or one key in two scopes, are two requests:
// each runs.
func (l ledgerSuite[S, W, A, R]) twoCalls(t *testing.T, key1, scope1, key2, scope2 string) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	l.once(t, w, l.ctx(t, key1, scope1, false), a, "first request "+scope1)
	l.once(t, w, l.ctx(t, key2, scope2, false), a, "second request "+scope2)
	e.wantExecutions(t, 2)
	e.wantRows(t, 2)
	e.wantEffects(t, 2)
}

// expired: a retry (idem.ContextWithRetry) one microsecond before the
// retention ends replays; one microsecond after, the key is new and the
// method runs again.
func (l ledgerSuite[S, W, A, R]) expired(t *testing.T) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	ctx := l.ctx(t, "expiring", "", false)
	keep := retentionOf(l.method.Retention)
	l.once(t, w, ctx, a, "first request")
	e.clock.Advance(keep - time.Microsecond)
	l.once(t, w, idem.ContextWithRetry(ctx), a, "the same key just inside its retention")
	e.wantExecutions(t, 1)
	e.clock.Advance(2 * time.Microsecond)
	l.once(t, w, idem.ContextWithRetry(ctx), a, "the same key after its retention")
	e.wantExecutions(t, 2)
	e.wantRows(t, 1)
	e.wantEffects(t, 2)
}

// sweep: Store.Sweep deletes nothing while the key's retention lasts, and
// the key once it has passed.
func (l ledgerSuite[S, W, A, R]) sweep(t *testing.T) {
	e, _, w := l.setup(t)
	a := l.sample(t)
	ctx := l.ctx(t, "swept", "", false)
	keep := retentionOf(l.method.Retention)
	l.once(t, w, ctx, a, "first request")
	e.clock.Advance(keep - time.Microsecond)
	if n, err := e.store.Sweep(ctx, 0); err != nil || n != 0 {
		t.Errorf("a sweep inside the key's retention deleted %d rows (err %v), want 0", n, err)
	}
	l.once(t, w, idem.ContextWithRetry(ctx), a, "retry after the sweep")
	e.wantExecutions(t, 1)
	e.clock.Advance(2 * time.Microsecond)
	if n, err := e.store.Sweep(ctx, 0); err != nil || n != 1 {
		t.Errorf("a sweep after the key's retention deleted %d rows (err %v), want 1", n, err)
	}
	e.wantRows(t, 0)
}

// failingAtomic: the work ran but the transaction failed: nothing is
// stored, and a retry runs.
func (l ledgerSuite[S, W, A, R]) failingAtomic(t *testing.T) {
	e, svc, w := l.setup(t)
	a := l.sample(t)
	ctx := l.ctx(t, "failing", "", false)
	if _, err := l.direct(ctx, e, svc, a, true, errInjected); !errors.Is(err, errInjected) {
		t.Fatalf("failing attempt: got error %v, want the injected failure", err)
	}
	e.wantRows(t, 0)
	e.wantEffects(t, 0)
	l.once(t, w, ctx, a, "retry after the failed attempt")
	e.wantExecutions(t, 2)
	e.wantRows(t, 1)
	e.wantEffects(t, 1)
}

// finalErrors: each declared final error is stored: a retry
// (idem.ContextWithRetry) replays it (errors.Is holds) and does not run the
// method.
func (l ledgerSuite[S, W, A, R]) finalErrors(t *testing.T) {
	for _, f := range l.method.FinalErrors {
		t.Run("final error "+f.Name, func(t *testing.T) {
			e, svc, w := l.setup(t)
			a := l.sample(t)
			ctx := l.ctx(t, "final-"+f.Name, "", false)
			if _, err := l.direct(ctx, e, svc, a, false, f.Err); !errors.Is(err, f.Err) {
				t.Fatalf("first attempt: got error %v, want %s", err, f.Name)
			}
			if _, err := l.call(w, idem.ContextWithRetry(ctx), a); !errors.Is(err, f.Err) {
				t.Errorf("retry after the final error: got error %v, want %s replayed", err, f.Name)
			}
			e.wantExecutions(t, 1)
			e.wantRows(t, 1)
		})
	}
}
