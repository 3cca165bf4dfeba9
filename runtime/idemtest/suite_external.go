package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// External is the generated test suite of one external-mode method (its
// work has effects outside the database): S is the service, W its
// generated wrapper, A the request and R the response (struct{} for a
// method that returns only an error).
//
// Run checks, against a real PostgreSQL holding the package's migrations,
// what Atomic's Run checks for the ledger (twins, storm, mismatch, keys,
// scopes, expiry, sweep, final errors) and what only an in-progress claim
// promises: a failing body releases the key, a crashed attempt holds it
// until its lock times out, an attempt that outlived its lock cannot
// finish, Step and DownstreamKey survive a takeover, and a key reused after
// its retention gets a new downstream key.
type External[S, W, A, R any] struct {
	Package Package
	// Store builds the store (nil: idem.NewStore over db.Pool); the
	// methods of a type whose other methods take a *sql.Tx share their
	// store, built by idem.NewSQLStore over db.SQL.
	Store       StoreFunc
	Method      *idem.Method[R]
	Fingerprint func(A) []byte
	New         func(*testing.T, *DB) S                // the package's fixture, e.g. newPaymentsForTest
	Wrap        func(S, *idem.Store) W                 // the generated constructor
	Call        func(W, context.Context, A) (R, error) // the wrapper's method
	Body        func(S, context.Context, A) (R, error) // the service's own method
	Sample      func(*testing.T) A                     // the sample fixture
	// Other returns a second valid request whose fingerprint differs from
	// the sample's (see Atomic.Other); nil: no mismatch scenario.
	Other func(*testing.T) A
	// Effects counts the method's effects; nil counts executions only.
	Effects func(*testing.T, *DB) int
	Storm   int // concurrent requests in the storm; 0: DefaultStorm
	// Equal compares two responses of the method (a replay with the first
	// answer); nil: reflect.DeepEqual. The generated tests of a method that
	// returns a protobuf message set idemproto.Equal (proto.Equal).
	Equal func(a, b R) bool
	// KeyFromRequest: the wrapper takes the key from the request when the
	// context carries none (-key); the sample must set that field.
	KeyFromRequest bool
}

// Run runs every scenario as a subtest of t.
func (s External[S, W, A, R]) Run(t *testing.T) {
	l := s.ledger()
	l.common(t)
	t.Run("failing body releases the claim", s.failing(l))
	l.finalErrors(t)
	t.Run("crash mid-work, then takeover", s.crash(l))
	t.Run("attempt that outlived its lock", s.zombie(l, false))
	t.Run("downstream key after the retention", s.downstream(l))
	t.Run("stale attempt after a sweep", s.zombie(l, true))
}

func (s External[S, W, A, R]) ledger() ledgerSuite[S, W, A, R] {
	return ledgerSuite[S, W, A, R]{
		pkg: s.Package, store: s.Store, method: s.Method, fp: s.Fingerprint, newSvc: s.New, wrap: s.Wrap, call: s.Call,
		sample: s.Sample, other: s.Other, effects: s.Effects, storm: s.Storm, external: true, equal: equalOrDeep(s.Equal), keyFromRequest: s.KeyFromRequest,
		direct: func(ctx context.Context, e *env, svc S, a A, work bool, fail error) (R, error) {
			return idem.External(ctx, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context) (R, error) {
				var zero R
				if work {
					if _, err := s.Body(svc, ctx, a); err != nil {
						return zero, err
					}
				}
				return zero, fail
			})
		},
	}
}

func (s External[S, W, A, R]) lockTimeout() time.Duration {
	if s.Method.LockTimeout > 0 {
		return s.Method.LockTimeout
	}
	return idem.DefaultLockTimeout
}

// failing: a non-final error releases the claim: a retry runs at once.
func (s External[S, W, A, R]) failing(l ledgerSuite[S, W, A, R]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "failing", "")
		if _, err := l.direct(ctx, e, svc, a, false, errInjected); !errors.Is(err, errInjected) {
			t.Fatalf("failing attempt: got error %v, want the injected failure", err)
		}
		l.once(t, w, ctx, a, "retry after the failed attempt")
		e.wantExecutions(t, 2)
		e.wantEffects(t, 1)
	}
}

// crash: an attempt that dies after the work keeps the key in progress;
// after the lock timeout a retry takes over.
func (s External[S, W, A, R]) crash(l ledgerSuite[S, W, A, R]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		crashed, crash := context.WithCancel(keyCtx(t, "crashing", ""))
		_, err := idem.External(crashed, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context) (R, error) {
			r, err := s.Body(svc, ctx, a)
			if err != nil {
				return r, err
			}
			crash() // the caller dies before the response is stored
			return r, ctx.Err()
		})
		if err == nil {
			t.Fatal("the crashed attempt reported success")
		}
		ctx := keyCtx(t, "crashing", "")
		if _, err := s.Call(w, ctx, a); !errors.Is(err, idem.ErrInProgress) {
			t.Fatalf("retry while the crashed attempt holds the key: got error %v, want idem.ErrInProgress", err)
		}
		e.clock.Advance(s.lockTimeout() + time.Second)
		l.once(t, w, ctx, a, "retry after the lock timeout")
		l.once(t, w, ctx, a, "replay after the takeover")
		e.wantExecutions(t, 2)
		e.wantRows(t, 1)
	}
}

// zombie: an attempt still working after its lock expired (swept: and its
// retention, its row swept and the key claimed anew) is taken over, and
// cannot finalise while the takeover works (idem.ErrLockLost). Unswept, the
// takeover keeps its DownstreamKey and recorded Step.
func (s External[S, W, A, R]) zombie(l ledgerSuite[S, W, A, R], swept bool) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		outer := keyCtx(t, map[bool]string{false: "zombie", true: "stale"}[swept], "")
		var steps atomic.Int64
		step := func(ctx context.Context, who string) (string, error) {
			if swept {
				return "", nil
			}
			_, err := idem.Step(ctx, "idemgen-step", func(context.Context) (int64, error) { return steps.Add(1), nil })
			if err != nil {
				return "", fmt.Errorf("%s's step: %w", who, err)
			}
			return idem.DownstreamKey(ctx, "idemgen"), nil
		}
		outlived, finish, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
		release := sync.OnceFunc(func() { close(finish) })
		var err error
		var firstKey string
		go func() {
			defer close(finished)
			_, err = idem.External(outer, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context) (R, error) {
				var zero R
				var serr error
				if firstKey, serr = step(ctx, "first attempt"); serr != nil {
					return zero, serr
				}
				s.outlive(t, e, ctx, swept)
				close(outlived)
				<-finish // it finishes while the takeover holds the key
				return zero, nil
			})
		}()
		select {
		case <-outlived:
		case <-finished:
			t.Fatalf("the first attempt ended before it outlived its lock: %v", err)
		}
		var takeoverKey string
		takeover, takeoverErr := idem.External(outer, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context) (R, error) {
			var zero R
			var serr error
			if takeoverKey, serr = step(ctx, "takeover"); serr != nil {
				return zero, serr
			}
			release()
			<-finished // the first attempt tries to finalise while this one holds the key
			return s.Body(svc, ctx, a)
		})
		release() // in case the takeover never ran its body
		<-finished
		s.judgeZombie(t, err, takeoverErr, swept)
		if !swept {
			if firstKey != takeoverKey {
				t.Errorf("DownstreamKey changed across the takeover: %q, then %q", firstKey, takeoverKey)
			}
			if n := steps.Load(); n != 1 {
				t.Errorf("a Step recorded before the takeover ran %d times, want 1", n)
			}
		}
		again := l.once(t, w, outer, a, "retry after the takeover finished")
		if !equalOrDeep(s.Equal)(again, takeover) {
			t.Errorf("the retry replayed %#v, the takeover returned %#v: the attempt that lost its lock overwrote the answer", again, takeover)
		}
		e.wantExecutions(t, 2)
		e.wantRows(t, 1)
	}
}

// outlive moves the clock past the attempt's lock (and, swept, past its
// retention, then sweeps its row).
func (s External[S, W, A, R]) outlive(t *testing.T, e *env, ctx context.Context, swept bool) {
	if !swept {
		e.clock.Advance(s.lockTimeout() + time.Second)
		return
	}
	e.clock.Advance(retentionOf(s.Method.Retention) + s.lockTimeout() + time.Second)
	if n, err := e.store.Sweep(ctx, 0); err != nil || n != 1 {
		t.Errorf("a sweep after the stale attempt's retention deleted %d rows (err %v), want 1", n, err)
	}
}

func (s External[S, W, A, R]) judgeZombie(t *testing.T, err, takeoverErr error, swept bool) {
	t.Helper()
	if !errors.Is(err, idem.ErrLockLost) {
		if swept {
			t.Errorf("the stale attempt finished after a sweep with error %v, want idem.ErrLockLost", err)
		} else {
			t.Errorf("the attempt that outlived its lock finished with error %v, want idem.ErrLockLost", err)
		}
	}
	if takeoverErr != nil {
		t.Fatalf("the takeover: %v", takeoverErr)
	}
}

// downstream: the same key sent after the retention is a new request:
// idem.DownstreamKey gives it a new downstream key, so a third party does
// not answer it with the first request's result.
func (s External[S, W, A, R]) downstream(l ledgerSuite[S, W, A, R]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, _ := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "downstream", "")
		var keys []string
		run := func(what string) {
			_, err := idem.External(ctx, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context) (R, error) {
				keys = append(keys, idem.DownstreamKey(ctx, "idemgen"))
				return s.Body(svc, ctx, a)
			})
			must(t, what, err)
		}
		run("first request")
		e.clock.Advance(retentionOf(s.Method.Retention) + time.Microsecond)
		run("the same key after its retention")
		if keys[0] == keys[1] {
			t.Errorf("DownstreamKey is %q before and after the retention, want a new key for the new request", keys[0])
		}
		e.wantExecutions(t, 2)
	}
}
