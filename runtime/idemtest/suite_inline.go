package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// InlineTx is the generated test suite of one inline-mode method, whose
// key lives in the row its own INSERT writes, in a transaction T, a pgx.Tx
// or a *sql.Tx (idem.Inline takes either). S is the service, W its generated
// wrapper, A the request and R the response.
//
// Run checks, against a real PostgreSQL holding the package's migrations
// and counting rows of the business table itself: twins and a storm write
// one row, a reused key with another request is refused and writes nothing,
// keys are scoped, a key expires (its row stays), the sweep takes expired
// keys off their rows and leaves live ones, a failing body or one that
// forgets its key leaves no row, and MInTx keeps the caller's transaction
// usable.
type InlineTx[S, W, A, R, T any] struct {
	Package Package
	// Store builds the store (nil: idem.NewStore over db.Pool); a method
	// that takes a *sql.Tx needs idem.NewSQLStore over db.SQL.
	Store       StoreFunc
	Method      *idem.InlineMethod[R]
	Fingerprint func(A) []byte
	New         func(*testing.T, *DB) S                                        // the package's fixture
	Wrap        func(S, *idem.Store) W                                         // the generated constructor
	Call        func(W, context.Context, A) (R, error)                         // the wrapper's method
	CallInTx    func(W, context.Context, T, A) (R, error)                      // the wrapper's MInTx
	Sweep       func(W, context.Context, int) (int64, error)                   // the wrapper's Sweep<M>Keys
	Body        func(S, context.Context, T, A) (R, error)                      // the service's own method
	Lookup      func(S, context.Context, T, idem.InlineKey) (R, []byte, error) // the service's lookup
	Sample      func(*testing.T) A                                             // the sample fixture
	// Other returns a second valid request whose fingerprint differs from
	// the sample's (see AtomicTx.Other); nil: no mismatch scenario.
	Other func(*testing.T) A
	// Effects counts the method's effects beyond its keyed row (the
	// optional count…Effects fixture: a balance, a second table); nil: the
	// suite counts the business table's rows only.
	Effects func(*testing.T, *DB) int
	Storm   int // concurrent requests in the storm; 0: DefaultStorm
	// Equal compares two responses of the method (a replay with the first
	// answer); nil: reflect.DeepEqual. The generated tests of a method that
	// returns a protobuf message set idemproto.Equal (proto.Equal).
	Equal func(a, b R) bool

	rt callerTx[T] // set by Run
}

// Inline is the suite of an inline method that takes a pgx.Tx.
type Inline[S, W, A, R any] = InlineTx[S, W, A, R, pgx.Tx]

// inlineEnv is one inline scenario's database, service and wrapper, the
// business table's name as SQL, and what the scenario reads and changes in
// that table.
type inlineEnv[S, W any] struct {
	*env
	svc      S
	w        W
	table    string // quoted
	tableSQL ledger.InlineHarnessStatements
}

// Run runs every scenario as a subtest of t.
func (s InlineTx[S, W, A, R, T]) Run(t *testing.T) {
	s.rt = callerTxOf[T](t)
	n := s.Storm
	if n == 0 {
		n = DefaultStorm
	}
	t.Run("twins", s.race(2, "twins"))
	t.Run("storm", s.race(n, "storm"))
	if s.Other != nil {
		t.Run("same key, different request", s.mismatch)
	}
	t.Run("distinct keys", func(t *testing.T) { s.twoCalls(t, "key-a", "", "key-b", "") })
	t.Run("same key, two scopes", func(t *testing.T) { s.twoCalls(t, "shared", "tenant-a", "shared", "tenant-b") })
	t.Run("expired key", s.expired)
	t.Run("sweep keeps live keys", s.sweep)
	t.Run("the store's janitor sweeps it", s.janitor)
	t.Run("failing body leaves no row", s.failing)
	t.Run("body that forgets the key", s.forgetful)
	t.Run("in the caller's transaction", s.inTx)
	t.Run("failing body in the caller's transaction", s.failingInTx)
}

// setup builds the service and its wrapper over a fresh database holding
// the package's migrations, with a store that reads the database's clock
// (the column default stamps a key's claimed-at time).
func (s InlineTx[S, W, A, R, T]) setup(t *testing.T) inlineEnv[S, W] {
	t.Helper()
	e := newEnv(t, s.Package, s.Method.Name, false, s.Store)
	schema, err := ledger.NewInline(s.Method.Table)
	if err != nil {
		t.Fatalf("inline table %q: %v", s.Method.Table, err)
	}
	svc := s.New(t, e.db)
	e.countEffects(t, s.Effects)
	return inlineEnv[S, W]{env: e, svc: svc, w: s.Wrap(svc, e.store), table: schema.Table.Quoted(), tableSQL: schema.HarnessStatements()}
}

// count counts the business table's rows, those carrying key if key is set.
func (ie inlineEnv[S, W]) count(t *testing.T, key string) int {
	t.Helper()
	q, args := ie.tableSQL.Rows, []any{}
	if key != "" {
		q, args = ie.tableSQL.KeyedRows, []any{key}
	}
	var n int
	if err := ie.db.Pool.QueryRow(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count rows of %s: %v", ie.table, err)
	}
	return n
}

// wantKeyed fails the test unless the table holds want rows carrying key.
func (ie inlineEnv[S, W]) wantKeyed(t *testing.T, key string, want int) {
	t.Helper()
	if got := ie.count(t, key); got != want {
		t.Errorf("%s holds %d rows with key %q, want %d", ie.table, got, key, want)
	}
}

// wantTotal fails the test unless the table holds want rows in all.
func (ie inlineEnv[S, W]) wantTotal(t *testing.T, want int, why string) {
	t.Helper()
	if got := ie.count(t, ""); got != want {
		t.Errorf("%s holds %d rows, want %d: %s", ie.table, got, want, why)
	}
}

// age moves key's claimed-at time back past the retention (expired), or
// back three quarters of it (a live key that a too short retention would
// take for expired).
func (s InlineTx[S, W, A, R, T]) age(t *testing.T, ie inlineEnv[S, W], key string, expired bool) {
	t.Helper()
	keep := retentionOf(s.Method.Retention)
	by := keep + time.Minute
	if !expired {
		by = keep * 3 / 4
	}
	_, err := ie.db.Pool.Exec(t.Context(), ie.tableSQL.Age, by.Microseconds(), key)
	must(t, "age the key", err)
}

func (s InlineTx[S, W, A, R, T]) once(t *testing.T, ie inlineEnv[S, W], ctx context.Context, a A, what string) {
	t.Helper()
	if _, err := s.Call(ie.w, ctx, a); err != nil {
		t.Fatalf("%s (key %q; the request from %s must succeed): %v", what, keyOf(ctx), funcName(s.Sample), err)
	}
}

// race: n identical requests released at once: one row, equal responses.
func (s InlineTx[S, W, A, R, T]) race(n int, key string) func(*testing.T) {
	return func(t *testing.T) {
		ie := s.setup(t)
		a := s.Sample(t)
		ie.warmUp(t, n)
		rs := Storm(t, n, func(int) result[R] {
			r, err := s.Call(ie.w, keyCtx(t, key, ""), a)
			return result[R]{r, err}
		})
		same(t, rs, equalOrDeep(s.Equal))
		ie.wantKeyed(t, key, 1)
		ie.wantEffects(t, 1)
	}
}

// mismatch: the same key with another request is refused with
// idem.ErrMismatch and writes nothing.
func (s InlineTx[S, W, A, R, T]) mismatch(t *testing.T) {
	ie := s.setup(t)
	ctx := keyCtx(t, "reused", "")
	s.once(t, ie, ctx, s.Sample(t), "first request")
	before := ie.count(t, "")
	o := otherRequest(t, s.Sample, s.Other, s.Fingerprint)
	if _, err := s.Call(ie.w, ctx, o); !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("same key, different request: got error %v, want idem.ErrMismatch", err)
	}
	ie.wantKeyed(t, "reused", 1)
	ie.wantTotal(t, before, "a refused request writes no row")
	ie.wantEffects(t, 1)
}

// twoCalls: different keys, or one key in two scopes, are two requests:
// two rows.
func (s InlineTx[S, W, A, R, T]) twoCalls(t *testing.T, key1, scope1, key2, scope2 string) {
	ie := s.setup(t)
	a := s.Sample(t)
	before := ie.count(t, "")
	s.once(t, ie, keyCtx(t, key1, scope1), a, "first request "+scope1)
	s.once(t, ie, keyCtx(t, key2, scope2), a, "second request "+scope2)
	ie.wantTotal(t, before+2, "each request writes its row")
	ie.wantEffects(t, 2)
}

// expired: a key sent again after the retention is new: a second row, the
// first keeps its data and loses its key.
func (s InlineTx[S, W, A, R, T]) expired(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	ctx := keyCtx(t, "expiring", "")
	before := ie.count(t, "")
	s.once(t, ie, ctx, a, "first request")
	s.age(t, ie, "expiring", false)
	s.once(t, ie, ctx, a, "the same key inside its retention")
	ie.wantTotal(t, before+1, "a retry inside the retention replays the row")
	s.age(t, ie, "expiring", true)
	s.once(t, ie, ctx, a, "the same key after its retention")
	ie.wantKeyed(t, "expiring", 1)
	ie.wantTotal(t, before+2, "both requests' rows stay")
	ie.wantEffects(t, 2)
}

// sweep: the sweep takes nothing off a live key, and takes an expired key
// off its row; it deletes no row.
func (s InlineTx[S, W, A, R, T]) sweep(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	before := ie.count(t, "")
	s.once(t, ie, keyCtx(t, "live", ""), a, "the live key's request")
	s.once(t, ie, keyCtx(t, "expiring", ""), a, "the expiring key's request")
	s.age(t, ie, "live", false)
	s.age(t, ie, "expiring", true)
	if n, err := s.Sweep(ie.w, t.Context(), 0); err != nil || n != 1 {
		t.Errorf("sweep: cleared %d keys (err %v), want 1: the expired one, not the live one", n, err)
	}
	ie.wantKeyed(t, "live", 1)
	ie.wantKeyed(t, "expiring", 0)
	ie.wantTotal(t, before+2, "the sweep deletes no row")
	s.once(t, ie, keyCtx(t, "live", ""), a, "retry of the live key after the sweep")
	ie.wantTotal(t, before+2, "a retry of a live key after the sweep replays its row")
	ie.wantEffects(t, 2)
}

// janitor: the generated constructor registers the method with its store
// (idem.RegisterInline), so the store's janitor (Store.SweepAll, which
// StartJanitor runs) takes the method's expired keys off their rows too.
func (s InlineTx[S, W, A, R, T]) janitor(t *testing.T) {
	ie := s.setup(t)
	s.once(t, ie, keyCtx(t, "expiring", ""), s.Sample(t), "the expiring key's request")
	s.age(t, ie, "expiring", true)
	if n, err := ie.store.SweepAll(t.Context(), 0); err != nil || n != 1 {
		t.Errorf("the store's janitor cleared %d keys (err %v), want 1: the wrapper's constructor must register %s with its store (idem.RegisterInline)", n, err, s.Method.Name)
	}
	ie.wantKeyed(t, "expiring", 0)
}

// failing: a body that writes its row and then fails leaves no row: no
// error is stored, and a retry runs.
func (s InlineTx[S, W, A, R, T]) failing(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	ctx := keyCtx(t, "failing", "")
	before := ie.count(t, "")
	_, err := idem.Inline(ctx, ie.store, s.Method, s.Fingerprint(a), s.lookup(ie.svc), func(ctx context.Context, tx T) (R, error) {
		r, err := s.Body(ie.svc, ctx, tx, a)
		if err != nil {
			return r, err
		}
		return r, errInjected
	})
	if !errors.Is(err, errInjected) {
		t.Fatalf("failing attempt: got error %v, want the injected failure", err)
	}
	ie.wantTotal(t, before, "the failed body's row must roll back")
	ie.wantEffects(t, 0)
	s.once(t, ie, ctx, a, "retry after the failed attempt")
	ie.wantKeyed(t, "failing", 1)
	ie.wantEffects(t, 1)
}

func (s InlineTx[S, W, A, R, T]) lookup(svc S) lookupFunc[R, T] {
	return func(ctx context.Context, tx T, k idem.InlineKey) (R, []byte, error) {
		return s.Lookup(svc, ctx, tx, k)
	}
}

// forgetful: a body that writes no row under its own key (here the method
// given another key) is refused with idem.ErrKeyNotWritten, and its row
// rolls back.
func (s InlineTx[S, W, A, R, T]) forgetful(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	before := ie.count(t, "")
	_, err := idem.Inline(keyCtx(t, "forgetful", ""), ie.store, s.Method, s.Fingerprint(a), s.lookup(ie.svc), func(ctx context.Context, tx T) (R, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		k.Key += "-elsewhere"
		return s.Body(ie.svc, idem.ContextWithInlineKey(ctx, k), tx, a)
	})
	if !errors.Is(err, idem.ErrKeyNotWritten) {
		t.Errorf("a body that forgets its key: got error %v, want idem.ErrKeyNotWritten", err)
	}
	ie.wantTotal(t, before, "the refused body's row must roll back")
	ie.wantEffects(t, 0)
}

// inTx: inside one caller transaction (MInTx) a retry replays, another
// request is refused, and the transaction stays usable.
func (s InlineTx[S, W, A, R, T]) inTx(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	ctx := keyCtx(t, "in-tx", "")
	tx, err := s.rt.begin(ctx, ie.db)
	must(t, "begin", err)
	defer func() { _ = s.rt.rollback(ctx, tx) }() // after Commit, a no-op
	first, err := s.CallInTx(ie.w, ctx, tx, a)
	must(t, "first call (the request from "+funcName(s.Sample)+" must succeed)", err)
	again, err := s.CallInTx(ie.w, ctx, tx, a)
	must(t, "retry in the same transaction", err)
	if !equalOrDeep(s.Equal)(first, again) {
		t.Errorf("the retry returned %#v, the first call %#v: a replay must equal the original", again, first)
	}
	if s.Other != nil {
		o := otherRequest(t, s.Sample, s.Other, s.Fingerprint)
		if _, err := s.CallInTx(ie.w, ctx, tx, o); !errors.Is(err, idem.ErrMismatch) {
			t.Errorf("same key, different request: got error %v, want idem.ErrMismatch", err)
		}
	}
	if err := s.rt.exec(ctx, tx, "SELECT 1"); err != nil {
		t.Fatalf("the caller's transaction is unusable after a refused claim: %v", err)
	}
	must(t, "commit", s.rt.commit(ctx, tx))
	ie.wantKeyed(t, "in-tx", 1)
	ie.wantEffects(t, 1)
}

// failingInTx: inside one caller transaction, a body that writes its row
// and then fails leaves no row, and the transaction stays usable.
func (s InlineTx[S, W, A, R, T]) failingInTx(t *testing.T) {
	ie := s.setup(t)
	a := s.Sample(t)
	ctx := keyCtx(t, "in-tx-failing", "")
	before := ie.count(t, "")
	tx, err := s.rt.begin(ctx, ie.db)
	must(t, "begin", err)
	defer func() { _ = s.rt.rollback(ctx, tx) }() // after Commit, a no-op
	_, err = idem.InlineInTx(ctx, ie.store, tx, s.Method, s.Fingerprint(a), s.lookup(ie.svc), func(ctx context.Context, tx T) (R, error) {
		r, err := s.Body(ie.svc, ctx, tx, a)
		if err != nil {
			return r, err
		}
		return r, errInjected
	})
	if !errors.Is(err, errInjected) {
		t.Fatalf("failing attempt: got error %v, want the injected failure", err)
	}
	if err := s.rt.exec(ctx, tx, "SELECT 1"); err != nil {
		t.Fatalf("the caller's transaction is unusable after the failed body: %v", err)
	}
	must(t, "commit", s.rt.commit(ctx, tx))
	ie.wantTotal(t, before, "the failed body's row must roll back")
	ie.wantEffects(t, 0)
	s.once(t, ie, ctx, a, "retry after the failed attempt")
	ie.wantKeyed(t, "in-tx-failing", 1)
	ie.wantEffects(t, 1)
}
