package idemtest

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// AtomicTx is the generated test suite of one atomic-mode method whose
// transaction is a T, a pgx.Tx or a *sql.Tx (idem.Atomic takes either). S is
// the service (*Payments), W its generated wrapper, A the request (the
// method's arguments after ctx and tx; a struct of them when there are
// several) and R the response (struct{} for a method that returns only an
// error).
//
// Run checks every promise the wrapper's doc comment makes, against a real
// PostgreSQL holding the package's migrations: twins and a storm run the
// body once, a reused key with another request is refused, keys are scoped
// and expire, the sweep keeps live keys, a failing body leaves nothing, final
// errors are stored and replayed, a retry replays whether or not it is
// marked idem.ContextWithRetry (a marked one without running the body),
// and MInTx keeps the caller's transaction usable.
type AtomicTx[S, W, A, R, T any] struct {
	Package Package
	// Store builds the store (nil: idem.NewStore over db.Pool); a method
	// that takes a *sql.Tx needs idem.NewSQLStore over db.SQL.
	Store       StoreFunc
	Method      *idem.Method[R]
	Fingerprint func(A) []byte
	New         func(*testing.T, *DB) S                   // the package's fixture, e.g. newPaymentsForTest
	Wrap        func(S, *idem.Store) W                    // the generated constructor
	Call        func(W, context.Context, A) (R, error)    // the wrapper's method
	CallInTx    func(W, context.Context, T, A) (R, error) // the wrapper's MInTx
	Body        func(S, context.Context, T, A) (R, error) // the service's own method
	Sample      func(*testing.T) A                        // the sample fixture
	// Other returns a second valid request whose fingerprint differs from
	// the sample's: the optional other…Args fixture, or one derived from the
	// sample by the generator. nil: no mismatch scenario.
	Other func(*testing.T) A
	// Effects counts the method's effects (the optional count…Effects
	// fixture); nil counts executions only.
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

// Atomic is the suite of an atomic method that takes a pgx.Tx.
type Atomic[S, W, A, R any] = AtomicTx[S, W, A, R, pgx.Tx]

// Run runs every scenario as a subtest of t.
func (s AtomicTx[S, W, A, R, T]) Run(t *testing.T) {
	rt := callerTxOf[T](t)
	l := ledgerSuite[S, W, A, R]{
		pkg: s.Package, store: s.Store, method: s.Method, fp: s.Fingerprint, newSvc: s.New, wrap: s.Wrap, call: s.Call,
		sample: s.Sample, other: s.Other, effects: s.Effects, storm: s.Storm, equal: equalOrDeep(s.Equal), keyFromRequest: s.KeyFromRequest,
		direct: func(ctx context.Context, e *env, svc S, a A, work bool, fail error) (R, error) {
			return idem.Atomic(ctx, e.store, s.Method, s.Fingerprint(a), func(ctx context.Context, tx T) (R, error) {
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
	l.unmarkedScenarios(t)
	t.Run("in the caller's transaction", s.inTx(l, rt))
	t.Run("failing body in the caller's transaction", s.failingInTx(l, rt))
	if s.Other != nil {
		t.Run("mismatch in the caller's transaction, rolled back", s.mismatchInTx(l, rt))
	}
	t.Run("twin recorded during the body", s.twinDuringBody(l, rt, twinCase{}))
	t.Run("body error after a twin recorded", s.twinDuringBody(l, rt, twinCase{fail: true}))
	t.Run("twin recorded during the body in the caller's transaction", s.twinDuringBody(l, rt, twinCase{inTx: true}))
	t.Run("twin recorded during the body of a marked retry in the caller's transaction", s.twinDuringBody(l, rt, twinCase{inTx: true, marked: true}))
	t.Run("twin took the expired key over during the body", s.twinDuringBody(l, rt, twinCase{expired: true}))
	t.Run("twin of a call holding the key", s.twinOfHolder(l, rt))
	t.Run("twin queued behind a call that failed", s.twinAfterRollback(l, rt))
}

// shortClaimWait is the claim wait of the store a twin that must be told
// the key is in progress runs on: twinStore.
const shortClaimWait = 50 * time.Millisecond

// twinStore builds a second store over e's database, on e's clock and
// table, whose claim wait is wait.
func (l ledgerSuite[S, W, A, R]) twinStore(t *testing.T, e *env, wait time.Duration) *idem.Store {
	t.Helper()
	build := l.store
	if build == nil {
		build = func(db *DB, opts ...idem.Option) (*idem.Store, error) { return idem.NewStore(db.Pool, opts...) }
	}
	table := l.pkg.Table
	if table == "" {
		table = idem.DefaultTable
	}
	st, err := build(e.db, idem.WithTable(table), idem.WithClock(e.clock.Now), idem.WithClaimWait(wait))
	if err != nil {
		t.Fatalf("build the twin's store (%s): %v", funcName(build), err)
	}
	return st
}

// twinAfterRollback: a twin queued on the key behind a call whose body
// did its work and then failed runs once the call rolled back, with the
// lock_timeout of its connection (the claim wait bounded its wait for the
// key, and nothing after it), and answers on its own; the failing call
// returns its error, or the twin's answer when the twin recorded the key
// before the failing call's lookup.
func (s AtomicTx[S, W, A, R, T]) twinAfterRollback(l ledgerSuite[S, W, A, R], rt callerTx[T]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, _ := l.setup(t)
		// The twin's claim wait outlasts the test's wait for it to queue.
		ts := l.twinStore(t, e, time.Minute)
		a := s.Sample(t)
		ctx := keyCtx(t, "twin-after-rollback", "")
		holding, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free()
		type answer struct {
			r        R
			err      error
			replayed bool
		}
		first := make(chan answer, 1)
		go func() {
			r, err := idem.Atomic(ctx, e.store, s.Method, s.Fingerprint(a), func(bctx context.Context, tx T) (R, error) {
				var zero R
				_, err := s.Body(svc, bctx, tx, a)
				if err == nil {
					err = rt.exec(bctx, tx, "SELECT 1") // the transaction is open
				}
				close(holding)
				<-release
				if err != nil {
					return zero, err
				}
				return zero, errInjected
			})
			first <- answer{r: r, err: err}
		}()
		<-holding
		twin := make(chan answer, 1)
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		go func() {
			octx, o := idem.ContextWithOutcome(tctx)
			r, err := idem.Atomic(octx, ts, s.Method, s.Fingerprint(a), func(bctx context.Context, tx T) (R, error) {
				out, err := s.Body(svc, bctx, tx, a)
				if err == nil {
					err = rt.exec(bctx, tx, lockTimeoutIsTheSessions)
				}
				return out, err
			})
			twin <- answer{r, err, o.Replayed()}
		}()
		if why := waitQueued(t, e.db, func() bool { return len(twin) > 0 }); why != "" {
			cancel()
			t.Fatalf("a twin of a call holding the key %s, want it queued on the key's lock", why)
		}
		free()
		// The failing call looks the key up after its rollback: a twin
		// that recorded the key by then answers it (a body error is
		// answered from the key's row); which of the two comes first is
		// the machine's.
		failed := <-first
		if failed.err != nil && !errors.Is(failed.err, errInjected) {
			t.Fatalf("the failing call: got error %v, want the injected failure or the twin's answer", failed.err)
		}
		got := <-twin
		must(t, "the twin queued behind a call that failed (the request from "+funcName(s.Sample)+" must succeed)", got.err)
		if failed.err == nil && !equalOrDeep(s.Equal)(failed.r, got.r) {
			t.Errorf("the failing call answered %v, want the injected failure or the twin's answer %v", failed.r, got.r)
		}
		if got.replayed {
			t.Errorf("the twin of a call that failed answered as a replay, want its own answer")
		}
		e.wantRows(t, 1)
		e.wantEffects(t, 1)
	}
}

// lockTimeoutIsTheSessions fails unless the transaction's lock_timeout is
// the session's.
const lockTimeoutIsTheSessions = `DO $$ BEGIN
IF (SELECT setting <> reset_val FROM pg_settings WHERE name = 'lock_timeout') THEN
    RAISE EXCEPTION 'the body runs with lock_timeout %, not the session''s', current_setting('lock_timeout');
END IF; END $$`

// waitQueued returns "" once a session waits for an advisory lock on db,
// or why not: a session waits on a row first, or done reports the twin
// answered without waiting.
func waitQueued(t *testing.T, db *DB, done func() bool) string {
	t.Helper()
	for {
		if done() {
			return "answered at once"
		}
		var advisory, rows int
		err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE locktype = 'advisory'),
       count(*) FILTER (WHERE locktype IN ('transactionid', 'tuple'))
FROM pg_locks WHERE NOT granted`).Scan(&advisory, &rows)
		must(t, "read pg_locks", err)
		switch {
		case advisory > 0:
			return ""
		case rows > 0:
			return "waits on a row the call holds"
		}
		time.Sleep(time.Millisecond)
	}
}

// holdsKeyBeforeBody reports whether the key's lock is taken before the
// body runs: on a *sql.Tx, which cannot carry it with the body's first
// statement as a pgx.Tx does.
func holdsKeyBeforeBody[T any]() bool {
	_, ok := any((*T)(nil)).(**sql.Tx)
	return ok
}

// twinOfHolder: a twin of a call whose body has done its work and not
// committed (the call holds the key, and whatever rows its work locked) is
// told the key is in progress once the claim wait ends (*InProgressError:
// 409 over HTTP, ABORTED over gRPC), instead of waiting for the call, on
// the key's ledger row or on a row the work holds, for as long as its
// context allows; its body does not run. The call then commits its own
// answer, which the twin's retry replays.
func (s AtomicTx[S, W, A, R, T]) twinOfHolder(l ledgerSuite[S, W, A, R], rt callerTx[T]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		tw := s.Wrap(svc, l.twinStore(t, e, shortClaimWait))
		a := s.Sample(t)
		ctx := keyCtx(t, "twin-of-holder", "")
		var twinErr error
		got, err := idem.Atomic(ctx, e.store, s.Method, s.Fingerprint(a), func(bctx context.Context, tx T) (R, error) {
			out, err := s.Body(svc, bctx, tx, a)
			if err != nil {
				return out, err
			}
			// The transaction is open (a body that sent nothing has not
			// begun it yet).
			must(t, "a statement in the body's transaction", rt.exec(bctx, tx, "SELECT 1"))
			// A twin that waited on the call would wait for ever (the call
			// waits for it): its own deadline, far beyond the claim wait,
			// ends that wait (and keeps a broken runtime's run short).
			tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, twinErr = s.Call(tw, tctx, a)
			return out, nil
		})
		must(t, "the call (the request from "+funcName(s.Sample)+" must succeed)", err)
		var ip *idem.InProgressError
		if !errors.As(twinErr, &ip) {
			t.Fatalf("a twin of a call holding the key: got error %v, want an *idem.InProgressError after the claim wait (%s)", twinErr, shortClaimWait)
		}
		e.wantExecutions(t, 1)
		e.wantRows(t, 1)
		e.wantEffects(t, 1)
		again, err := s.Call(w, ctx, a)
		must(t, "the twin's retry", err)
		same(t, []result[R]{{resp: got}, {resp: again}}, l.equal)
	}
}

// twinCase is a variant of twinDuringBody.
type twinCase struct {
	// inTx runs the call in a caller's transaction (MInTx), which stays
	// usable.
	inTx bool
	// fail makes the body return an error after the twin, as a body that
	// the twin's committed work makes fail would.
	fail bool
	// expired makes the key's row exist and expire first: the call's
	// lookup and the twin's find it expired, and the twin takes it over
	// (the record's takeover form, not the fresh one).
	expired bool
	// marked makes the call a marked retry (idem.ContextWithRetry): it
	// looks the key up before its body (finding nothing yet), so the
	// twin's row answers it through the lookup after its refused record,
	// not through a second run that looks up first.
	marked bool
}

// twinDuringBody: a twin runs to its end (on another connection) while the
// body runs, the key free (a first attempt, which does not look it up), or
// expired (a retry, marked idem.ContextWithRetry: its lookup found the row
// expired, and its record is the takeover); then
// the body does the work (or fails, twinCase). The call's record loses to
// the twin's row: its work rolls back, and it answers with the twin's
// response, as a replay, never with its own answer or error.
func (s AtomicTx[S, W, A, R, T]) twinDuringBody(l ledgerSuite[S, W, A, R], rt callerTx[T], c twinCase) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "twin-during-body", "")
		effects := 1
		if c.expired {
			l.once(t, w, ctx, a, "the first request, before the key expires")
			e.clock.Advance(retentionOf(l.method.Retention) + time.Microsecond)
			effects++
			ctx = idem.ContextWithRetry(ctx)
		}
		if c.marked {
			ctx = idem.ContextWithRetry(ctx)
		}
		// On a *sql.Tx the call holds the key's lock before its body runs:
		// the twin waits for it, and is told the key is in progress
		// (twinOfHolder); the call then answers on its own.
		held := holdsKeyBeforeBody[T]()
		tw := w
		if held {
			tw = s.Wrap(svc, l.twinStore(t, e, shortClaimWait))
		}
		var twin R
		var twinErr error
		body := func(bctx context.Context, tx T) (R, error) {
			twin, twinErr = s.Call(tw, ctx, a)
			if c.fail {
				var zero R
				return zero, errInjected
			}
			return s.Body(svc, bctx, tx, a)
		}
		octx, o := idem.ContextWithOutcome(ctx)
		var got R
		var err error
		if c.inTx {
			tx, berr := rt.begin(ctx, e.db)
			must(t, "begin", berr)
			defer func() { _ = rt.rollback(ctx, tx) }() // after Commit, a no-op
			got, err = idem.AtomicInTx(octx, e.store, tx, s.Method, s.Fingerprint(a), body)
			if err == nil {
				must(t, "the caller's transaction is unusable after the lost record", rt.exec(ctx, tx, "SELECT 1"))
				must(t, "commit", rt.commit(ctx, tx))
			}
		} else {
			got, err = idem.Atomic(octx, e.store, s.Method, s.Fingerprint(a), body)
		}
		if held {
			var ip *idem.InProgressError
			if !errors.As(twinErr, &ip) {
				t.Fatalf("a twin during the body of a call holding the key: got error %v, want an *idem.InProgressError", twinErr)
			}
			if c.fail {
				if !errors.Is(err, errInjected) {
					t.Fatalf("a failing body whose twin waited: got error %v, want the body's", err)
				}
				effects--
				e.wantRows(t, effects)
			} else {
				must(t, "the call whose twin waited", err)
				if o.Replayed() {
					t.Errorf("a call whose twin waited for it answered as a replay, want its own answer")
				}
				e.wantRows(t, 1)
			}
			e.wantEffects(t, effects)
			return
		}
		must(t, "the twin (the request from "+funcName(s.Sample)+" must succeed)", twinErr)
		if err != nil {
			t.Fatalf("a call whose twin recorded the key during its body: got error %v, want the twin's answer", err)
		}
		if !o.Replayed() {
			t.Errorf("a call whose twin recorded the key during its body answered on its own, want a replay of the twin's answer")
		}
		same(t, []result[R]{{resp: twin}, {resp: got}}, l.equal)
		e.wantRows(t, 1)
		e.wantEffects(t, effects)
	}
}

// inTx: inside one caller transaction (MInTx) a retry replays, another
// request is refused, and the transaction stays usable.
func (s AtomicTx[S, W, A, R, T]) inTx(l ledgerSuite[S, W, A, R], rt callerTx[T]) func(*testing.T) {
	return func(t *testing.T) {
		e, _, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "in-tx", "")
		tx, err := rt.begin(ctx, e.db)
		must(t, "begin", err)
		defer func() { _ = rt.rollback(ctx, tx) }() // after Commit, a no-op
		first, err := s.CallInTx(w, ctx, tx, a)
		must(t, "first call (the request from "+funcName(s.Sample)+" must succeed)", err)
		// The retries are marked (idem.ContextWithRetry): they look the
		// key up first, and the body runs once. An unmarked one would run
		// it again under its savepoint, rolled back when the key's row
		// refuses its record: the same answers, one more run.
		retry := idem.ContextWithRetry(ctx)
		again, err := s.CallInTx(w, retry, tx, a)
		must(t, "retry in the same transaction", err)
		if !equalOrDeep(s.Equal)(first, again) {
			t.Errorf("the retry returned %#v, the first call %#v: a replay must equal the original", again, first)
		}
		if s.Other != nil {
			o := otherRequest(t, s.Sample, s.Other, s.Fingerprint)
			if _, err := s.CallInTx(w, retry, tx, o); !errors.Is(err, idem.ErrMismatch) {
				t.Errorf("same key, different request: got error %v, want idem.ErrMismatch", err)
			}
		}
		if err := rt.exec(ctx, tx, "SELECT 1"); err != nil {
			t.Fatalf("the caller's transaction is unusable after a refused claim: %v", err)
		}
		must(t, "commit", rt.commit(ctx, tx))
		e.wantExecutions(t, 1)
		e.wantRows(t, 1)
	}
}

// mismatchInTx: a request refused as a mismatch inside a caller's
// transaction, which the caller then rolls back, still leaves the key's
// mismatch record: the record is written outside the caller's transaction.
func (s AtomicTx[S, W, A, R, T]) mismatchInTx(l ledgerSuite[S, W, A, R], rt callerTx[T]) func(*testing.T) {
	return func(t *testing.T) {
		e, _, w := l.setup(t)
		const key = "in-tx-mismatch"
		ctx := keyCtx(t, key, "")
		_, err := s.Call(w, ctx, s.Sample(t))
		must(t, "first call (the request from "+funcName(s.Sample)+" must succeed)", err)
		o := otherRequest(t, s.Sample, s.Other, s.Fingerprint)
		tx, err := rt.begin(ctx, e.db)
		must(t, "begin", err)
		defer func() { _ = rt.rollback(ctx, tx) }() // after Rollback, a no-op
		// Marked, as in inTx: the lookup finds the mismatch before the body.
		if _, err := s.CallInTx(w, idem.ContextWithRetry(ctx), tx, o); !errors.Is(err, idem.ErrMismatch) {
			t.Fatalf("same key, different request in the caller's transaction: got error %v, want idem.ErrMismatch", err)
		}
		must(t, "rollback", rt.rollback(ctx, tx))
		e.wantMismatchRecorded(t, key, s.Fingerprint(o), "a mismatch refused in the caller's transaction, which then rolled back")
		e.wantExecutions(t, 1)
	}
}

// failingInTx: inside one caller transaction, a body that does the work and
// then fails leaves none of it (nor the claim) in the transaction, which
// stays usable and commits the caller's own earlier work.
func (s AtomicTx[S, W, A, R, T]) failingInTx(l ledgerSuite[S, W, A, R], rt callerTx[T]) func(*testing.T) {
	return func(t *testing.T) {
		e, svc, w := l.setup(t)
		a := s.Sample(t)
		ctx := keyCtx(t, "in-tx-failing", "")
		tx, err := rt.begin(ctx, e.db)
		must(t, "begin", err)
		defer func() { _ = rt.rollback(ctx, tx) }() // after Commit, a no-op
		must(t, "the caller's own work", rt.exec(ctx, tx, "CREATE TABLE idemgen_caller_work (n int); INSERT INTO idemgen_caller_work VALUES (1)"))
		_, err = idem.AtomicInTx(ctx, e.store, tx, s.Method, s.Fingerprint(a), func(ctx context.Context, tx T) (R, error) {
			var zero R
			if _, err := s.Body(svc, ctx, tx, a); err != nil {
				return zero, err
			}
			return zero, errInjected
		})
		if !errors.Is(err, errInjected) {
			t.Fatalf("failing attempt: got error %v, want the injected failure", err)
		}
		must(t, "the caller's transaction is unusable after the failed body", rt.exec(ctx, tx, "INSERT INTO idemgen_caller_work VALUES (2)"))
		must(t, "commit", rt.commit(ctx, tx))
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
