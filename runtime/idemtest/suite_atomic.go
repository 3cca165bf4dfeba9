package idemtest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Atomic is the generated test suite of one atomic-mode method: S is the
// service (*Payments), W its generated wrapper, A the request (the method's
// arguments after ctx and tx; a struct of them when there are several) and
// R the response (struct{} for a method that returns only an error).
//
// Run checks every promise the wrapper's doc comment makes, against a real
// PostgreSQL holding the package's migrations: twins and a storm run the
// body once, a reused key with another request is refused, keys are scoped
// and expire, the sweep keeps live keys, a failing body leaves nothing, final
// errors are stored and replayed, and MInTx keeps the caller's transaction
// usable.
type Atomic[S, W, A, R any] struct {
	Package     Package
	Method      *idem.Method[R]
	Fingerprint func(A) []byte
	New         func(*testing.T, *DB) S                        // the package's fixture, e.g. newPaymentsForTest
	Wrap        func(S, *idem.Store) W                         // the generated constructor
	Call        func(W, context.Context, A) (R, error)         // the wrapper's method
	CallInTx    func(W, context.Context, pgx.Tx, A) (R, error) // the wrapper's MInTx
	Body        func(S, context.Context, pgx.Tx, A) (R, error) // the service's own method
	Sample      func(*testing.T) A                             // the sample fixture
	// Other returns a second valid request whose fingerprint differs from
	// the sample's: the optional other…Args fixture, or one derived from the
	// sample by the generator. nil: no mismatch scenario.
	Other func(*testing.T) A
	// Effects counts the method's effects (the optional count…Effects
	// fixture); nil counts executions only.
	Effects func(*testing.T, *DB) int
	Storm   int // concurrent requests in the storm; 0: DefaultStorm
}

// Run runs every scenario as a subtest of t.
func (s Atomic[S, W, A, R]) Run(t *testing.T) {
	l := ledgerSuite[S, W, A, R]{
		pkg: s.Package, method: s.Method, fp: s.Fingerprint, newSvc: s.New, wrap: s.Wrap, call: s.Call,
		sample: s.Sample, other: s.Other, effects: s.Effects, storm: s.Storm,
		direct: func(ctx context.Context, e *env, svc S, a A, work bool, fail error) (R, error) {
			return idem.Atomic(ctx, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context, tx pgx.Tx) (R, error) {
				var zero R
				if work {
					if _, err := s.Body(svc, ctx, tx, a); err != nil {
						return zero, err
					}
				}
				return zero, fail
			})
		},
	}
	l.common(t)
	t.Run("failing body leaves no claim", l.failingAtomic)
	l.finalErrors(t)
	t.Run("in the caller's transaction", s.inTx(l))
	t.Run("failing body in the caller's transaction", s.failingInTx(l))
}

// inTx: inside one caller transaction (MInTx) a retry replays, another
// request is refused, and the transaction stays usable.
func (s Atomic[S, W, A, R]) inTx(l ledgerSuite[S, W, A, R]) func(*testing.T) {
	return func(t *testing.T) {
		e, _, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "in-tx", "")
		tx, err := e.db.Pool.Begin(ctx)
		must(t, "begin", err)
		defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
		first, err := s.CallInTx(w, ctx, tx, a)
		must(t, "first call (the request from "+funcName(s.Sample)+" must succeed)", err)
		again, err := s.CallInTx(w, ctx, tx, a)
		must(t, "retry in the same transaction", err)
		if !reflect.DeepEqual(first, again) {
			t.Errorf("the retry returned %#v, the first call %#v: a replay must equal the original", again, first)
		}
		if s.Other != nil {
			o := otherRequest(t, s.Sample, s.Other, s.Fingerprint)
			if _, err := s.CallInTx(w, ctx, tx, o); !errors.Is(err, idem.ErrMismatch) {
				t.Errorf("same key, different request: got error %v, want idem.ErrMismatch", err)
			}
		}
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("the caller's transaction is unusable after a refused claim: %v", err)
		}
		must(t, "commit", tx.Commit(ctx))
		e.wantExecutions(t, 1)
		e.wantRows(t, 1)
	}
}

// failingInTx: inside one caller transaction, a body that does the work and
// then fails leaves none of it (nor the claim) in the transaction, which
// stays usable and commits the caller's own earlier work.
func (s Atomic[S, W, A, R]) failingInTx(l ledgerSuite[S, W, A, R]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "in-tx-failing", "")
		tx, err := e.db.Pool.Begin(ctx)
		must(t, "begin", err)
		defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
		_, err = tx.Exec(ctx, "CREATE TABLE idemgen_caller_work (n int); INSERT INTO idemgen_caller_work VALUES (1)")
		must(t, "the caller's own work", err)
		_, err = idem.AtomicInTx(ctx, e.store, tx, s.Method, s.Fingerprint(a), func(ctx context.Context, tx pgx.Tx) (R, error) {
			var zero R
			if _, err := s.Body(svc, ctx, tx, a); err != nil {
				return zero, err
			}
			return zero, errInjected
		})
		if !errors.Is(err, errInjected) {
			t.Fatalf("failing attempt: got error %v, want the injected failure", err)
		}
		_, err = tx.Exec(ctx, "INSERT INTO idemgen_caller_work VALUES (2)")
		must(t, "the caller's transaction is unusable after the failed body", err)
		must(t, "commit", tx.Commit(ctx))
		var n int
		if err := e.db.Pool.QueryRow(ctx, "SELECT count(*) FROM idemgen_caller_work").Scan(&n); err != nil || n != 2 {
			t.Errorf("the caller's own work: %d rows committed (err %v), want 2", n, err)
		}
		e.wantRows(t, 0)
		e.wantEffects(t, 0)
		_, err = s.Call(w, ctx, a)
		must(t, "retry after the failed attempt", err)
		e.wantExecutions(t, 2)
		e.wantRows(t, 1)
		e.wantEffects(t, 1)
	}
}
