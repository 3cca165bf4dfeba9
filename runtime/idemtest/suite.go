package idemtest

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Package is what the generated tests of one package share: the ledger
// table its store uses and the migrations it ships, which every test
// database gets before a scenario runs.
type Package struct {
	// Table is the ledger table (idem.WithTable); "" for idem.DefaultTable.
	Table string
	// Migrations are the package's migrations (its own tables included),
	// applied to each test's fresh database.
	Migrations Migrations
}

// DefaultStorm is the number of concurrent requests a storm scenario sends
// when a suite's Storm is 0.
const DefaultStorm = 32

// errInjected stands for a failure after the work was done.
var errInjected = errors.New("injected failure after the work")

// NoResult adapts a method that returns only an error to the shape the
// suites call, with struct{} as its response: the generated wrapper of
// such a method stores struct{}.
func NoResult[X, A any](f func(X, context.Context, A) error) func(X, context.Context, A) (struct{}, error) {
	return func(x X, ctx context.Context, a A) (struct{}, error) { return struct{}{}, f(x, ctx, a) }
}

// NoResultTx is NoResult for a method that takes a transaction T (pgx.Tx
// or *sql.Tx).
func NoResultTx[X, T, A any](f func(X, context.Context, T, A) error) func(X, context.Context, T, A) (struct{}, error) {
	return func(x X, ctx context.Context, tx T, a A) (struct{}, error) { return struct{}{}, f(x, ctx, tx, a) }
}

// StoreFunc builds a scenario's store over its database with the suite's
// options (clock, hooks, table): a suite's Store field. nil builds it from
// db.Pool (idem.NewStore); a type whose methods take a *sql.Tx builds it
// from db.SQL (idem.NewSQLStore).
type StoreFunc func(db *DB, opts ...idem.Option) (*idem.Store, error)

// env is one scenario's fresh database (the package's migrations applied),
// its store, the store's clock, and counts of method bodies run (through
// the store's Executed hook, so the service's code is untouched) and of the
// method's effects (through the package's count fixture, when it has one).
type env struct {
	db        *DB
	clock     *Clock
	store     *idem.Store
	ledgerSQL ledger.HarnessStatements // what the scenario reads in the ledger
	method    string                   // the method's ledger name
	executed  atomic.Int64
	meeting   atomic.Pointer[Meeting]

	effects       func(*testing.T, *DB) int
	effectsBefore int
}

// newEnv creates the scenario's database and a store over it (built by
// store; nil: idem.NewStore over db.Pool) whose clock the scenario
// controls. Without withClock (inline mode) the store reads the database's.
func newEnv(t *testing.T, pkg Package, method string, withClock bool, store StoreFunc) *env {
	t.Helper()
	table := pkg.Table
	if table == "" {
		table = idem.DefaultTable
	}
	schema := WithMigrations(pkg.Migrations)
	if pkg.Migrations.Dir == "" { // -migrations=off: the ledger here, the rest by the fixture
		schema = WithTable(table)
	}
	// WithTable after WithMigrations names the ledger the migrations make,
	// whose placement a Citus cluster's database checks (EnvCitus).
	e := &env{db: New(t, schema, WithTable(table)), method: method}
	l, err := ledger.New(table)
	if err != nil {
		t.Fatalf("ledger table %q: %v", table, err)
	}
	e.ledgerSQL = l.HarnessStatements()
	opts := []idem.Option{idem.WithTable(table), idem.WithHooks(idem.Hooks{
		Executed:   func(context.Context, idem.Event) { e.executed.Add(1) },
		Claimed:    func(ctx context.Context, _ idem.Event) { e.meet(func(m *Meeting) { m.Claimed(ctx) }) },
		InProgress: func(ctx context.Context, _ idem.Event) { e.meet(func(m *Meeting) { m.Waited(ctx) }) },
		Replayed:   func(ctx context.Context, _ idem.Event) { e.meet(func(m *Meeting) { m.Waited(ctx) }) },
	})}
	if withClock {
		e.clock = NewClock(time.Time{})
		opts = append(opts, idem.WithClock(e.clock.Now))
	}
	if store == nil {
		store = func(db *DB, opts ...idem.Option) (*idem.Store, error) { return idem.NewStore(db.Pool, opts...) }
	}
	st, err := store(e.db, opts...)
	if err != nil {
		t.Fatalf("build the store (%s): %v", funcName(store), err)
	}
	e.store = st
	return e
}

// wantMismatchRecorded fails the test unless the ledger row of key holds
// the record of a refused request with fingerprint fp (mismatch_at set,
// mismatch_fingerprint fp), as idemledger inspect shows it to an operator
// asked about the refusal. It first waits for the records the store writes
// after their answer (idem.Store.Drain). what says which refusal it was.
func (e *env) wantMismatchRecorded(t *testing.T, key string, fp []byte, what string) {
	t.Helper()
	ctx := t.Context()
	if err := e.store.Drain(ctx); err != nil {
		t.Fatalf("%v", err)
	}
	var at *time.Time
	var got []byte
	if err := e.db.Pool.QueryRow(ctx, e.ledgerSQL.MismatchRecord, e.method, key).Scan(&at, &got); err != nil {
		t.Fatalf("read the mismatch record of key %q: %v", key, err)
	}
	if at == nil || string(got) != string(fp) {
		t.Errorf("%s: the ledger row of key %q holds mismatch_at %v, mismatch_fingerprint %x, want the refused request's record "+
			"(fingerprint %x): the refusal left no record for an operator (idemledger inspect)", what, key, at, got, fp)
	}
}

func (e *env) meet(fn func(*Meeting)) {
	if m := e.meeting.Load(); m != nil {
		fn(m)
	}
}

// countEffects starts counting the method's effects with count (nil: none).
func (e *env) countEffects(t *testing.T, count func(*testing.T, *DB) int) {
	t.Helper()
	if count != nil {
		e.effects = count
		e.effectsBefore = count(t, e.db)
	}
}

// wantEffects fails the test unless the method's effects grew by exactly
// want since setup. Without a count fixture it checks nothing.
func (e *env) wantEffects(t *testing.T, want int) {
	t.Helper()
	if e.effects == nil {
		return
	}
	if got := e.effects(t, e.db) - e.effectsBefore; got != want {
		t.Errorf("the method's effects grew by %d, want %d (counted by %s)", got, want, funcName(e.effects))
	}
}

// wantExecutions fails the test unless method bodies ran exactly want times.
func (e *env) wantExecutions(t *testing.T, want int64) {
	t.Helper()
	if got := e.executed.Load(); got != want {
		t.Errorf("the method body ran %d times, want %d", got, want)
	}
}

// wantRows fails the test unless the ledger holds exactly want rows for the
// method.
func (e *env) wantRows(t *testing.T, want int) {
	t.Helper()
	var got int
	if err := e.db.Pool.QueryRow(t.Context(), e.ledgerSQL.Rows, e.method).Scan(&got); err != nil {
		t.Fatalf("count ledger rows: %v", err)
	}
	if got != want {
		t.Errorf("the ledger holds %d rows for %s, want %d", got, e.method, want)
	}
}

// warmUp opens n pooled connections (at most the pool's size) before a
// race, so the concurrent requests meet on the key rather than queue behind
// connection set-up.
func (e *env) warmUp(t *testing.T, n int) {
	t.Helper()
	var release []func()
	for range min(n, int(e.db.Pool.Config().MaxConns)) {
		c, err := e.db.Pool.Acquire(t.Context())
		if err != nil {
			t.Fatalf("open a connection: %v", err)
		}
		release = append(release, c.Release)
	}
	for _, r := range release {
		r()
	}
}

// race sends n identical calls at once, the first to claim the key held in
// its claim until the others met it (Meeting), and checks that every call
// returned the first one's answer.
func race[R any](t *testing.T, e *env, n int, equal func(a, b R) bool, call func(i int) (R, error)) {
	t.Helper()
	e.warmUp(t, n)
	m := NewMeeting(e.db, n)
	e.meeting.Store(m)
	defer e.meeting.Store(nil)
	rs := Storm(t, n, func(i int) result[R] {
		r, err := call(i)
		return result[R]{r, err}
	})
	met, others := m.Met()
	t.Logf("%d of %d other attempts met the first on the key while it held its claim", met, others)
	same(t, rs, equal)
}

// result is what one call returned.
type result[R any] struct {
	resp R
	err  error
}

// same fails the test unless every call succeeded and returned a response
// equal to the first: a replay must equal the original.
func same[R any](t *testing.T, rs []result[R], equal func(a, b R) bool) {
	t.Helper()
	for i, r := range rs {
		if r.err != nil {
			t.Errorf("call %d of %d failed: %v", i, len(rs), r.err)
			continue
		}
		if !equal(r.resp, rs[0].resp) {
			t.Errorf("call %d returned %#v, call 0 returned %#v: a replay must equal the original", i, r.resp, rs[0].resp)
		}
	}
}

// equalOrDeep is a suite's Equal, or reflect.DeepEqual when it has none.
func equalOrDeep[R any](equal func(a, b R) bool) func(a, b R) bool {
	if equal != nil {
		return equal
	}
	return func(a, b R) bool { return reflect.DeepEqual(a, b) }
}

// keyCtx returns the test's context carrying an idempotency key and, if not
// empty, a scope.
func keyCtx(t *testing.T, key, scope string) context.Context {
	ctx := idem.ContextWithKey(t.Context(), key)
	if scope != "" {
		ctx = idem.ContextWithScope(ctx, scope)
	}
	return ctx
}

// must fails the test at once if err is not nil: what names the call.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// funcName is the name of a fixture function, for messages that point at
// it: samplePaymentsChargeArgs, not its import path.
func funcName(f any) string {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Func || v.IsNil() {
		return "?"
	}
	fn := runtime.FuncForPC(v.Pointer())
	if fn == nil {
		return "?"
	}
	name := fn.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if _, after, ok := strings.Cut(name, "."); ok {
		name = after
	}
	return name
}

// otherRequest returns the suite's other request, failing the test (and
// naming the fixture to fix) if its fingerprint is the sample's.
func otherRequest[A any](t *testing.T, sample, other func(*testing.T) A, fp func(A) []byte) A {
	t.Helper()
	o := other(t)
	if string(fp(o)) == string(fp(sample(t))) {
		t.Fatalf("%s returned a request with the fingerprint of %s's: the mismatch test needs another request; "+
			"make it differ in a fingerprinted field (not NaN, an infinity or a float too large to double)", funcName(other), funcName(sample))
	}
	return o
}

// retentionOf is the retention a method's keys are kept for.
func retentionOf(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return idem.DefaultRetention
}
