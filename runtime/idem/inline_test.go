package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// Order is the response of the inline-mode test method: the row itself.
type Order struct {
	ID   int64
	Item string
	Qty  int64
}

// ordersDDL is an existing business table, then the inline-mode columns and
// index, each statement on its own (the index is built concurrently).
func ordersDDL(t testing.TB) []string {
	t.Helper()
	s, err := ledger.NewInline("orders")
	require.NoError(t, err)
	return append([]string{
		`CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL, qty bigint NOT NULL, ref text UNIQUE)`,
		`INSERT INTO orders (item, qty) VALUES ('before inline mode', 1)`,
	}, s.DDL()...)
}

func ordersMethod() *idem.InlineMethod[Order] {
	return &idem.InlineMethod[Order]{Name: "Test.CreateOrder", Table: "orders", Retention: retention}
}

// createOrder is the work: one order row carrying the key, as a user writes it.
func createOrder(item string, qty int64) func(context.Context, pgx.Tx) (Order, error) {
	return func(ctx context.Context, tx pgx.Tx) (Order, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		return insertOrder(ctx, tx, k, item, qty)
	}
}

func insertOrder(ctx context.Context, tx pgx.Tx, k idem.InlineKey, item string, qty int64) (Order, error) {
	o := Order{Item: item, Qty: qty}
	err := tx.QueryRow(ctx, `INSERT INTO orders (item, qty, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4, $5) RETURNING id`, item, qty, k.Scope, k.Key, k.Fingerprint).Scan(&o.ID)
	if err != nil {
		return Order{}, fmt.Errorf("insert order: %w", err)
	}
	return o, nil
}

// orderByKey is the lookup, as a user writes it.
func orderByKey(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (Order, []byte, error) {
	var o Order
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id, item, qty, idempotency_fingerprint FROM orders
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&o.ID, &o.Item, &o.Qty, &fp)
	return o, fp, err
}

// inlineEnv is one fresh database with an orders table in inline mode. The
// store reads the database clock, which stamps the claimed-at column; tests
// step past the retention window by ageing the rows (age).
type inlineEnv struct {
	*env
	om *idem.InlineMethod[Order]
}

func newInlineEnv(t testing.TB, opts ...idemtest.Option) *inlineEnv {
	t.Helper()
	return newInlineEnvOn(t, pgxPath, opts...)
}

// newInlineEnvOn is newInlineEnv with the store of path p.
func newInlineEnvOn(t testing.TB, p path, opts ...idemtest.Option) *inlineEnv {
	t.Helper()
	e := &env{}
	e.db = idemtest.New(t, append([]idemtest.Option{idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(t)...)}, opts...)...)
	count := func(n *atomic.Int64) func(context.Context, idem.Event) {
		return func(context.Context, idem.Event) { n.Add(1) }
	}
	s, err := p.newStore(e.db, idem.WithBackoff(time.Millisecond),
		idem.WithHooks(idem.Hooks{
			Claimed: count(&e.claimed), Executed: count(&e.executed), Replayed: count(&e.replayed),
			Mismatch: count(&e.mismatches), TakenOver: count(&e.takenOver), Swept: count(&e.swept),
		}))
	require.NoError(t, err)
	e.store = s
	return &inlineEnv{env: e, om: ordersMethod()}
}

func (e *inlineEnv) order(ctx context.Context, item string, qty int64) (Order, error, bool) {
	ctx, o := idem.ContextWithOutcome(ctx)
	r, err := idem.Inline(ctx, e.store, e.om, fp(item), orderByKey, createOrder(item, qty))
	return r, err, o.Replayed()
}

type orderResult struct {
	o        Order
	err      error
	replayed bool
}

func (e *inlineEnv) call(ctx context.Context, item string) orderResult {
	o, err, replayed := e.order(ctx, item, 1)
	return orderResult{o, err, replayed}
}

// keyed counts the orders that carry a key (the row written before inline
// mode carries none).
func (e *inlineEnv) keyed(t testing.TB) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL").Scan(&n))
	return n
}

// age moves every keyed row's claimed-at d into the past.
func (e *inlineEnv) age(t testing.TB, d time.Duration) {
	t.Helper()
	_, err := e.db.Pool.Exec(context.Background(), `UPDATE orders
SET idempotency_claimed_at = idempotency_claimed_at - $1::bigint * interval '1 microsecond'
WHERE idempotency_key IS NOT NULL`, d.Microseconds())
	require.NoError(t, err)
}

func TestInlineClaimWritesOneRowAndReplays(t *testing.T) {
	e := newInlineEnv(t)
	first := e.call(keyed("k1"), "book")
	require.NoError(t, first.err)
	assert.False(t, first.replayed)
	assert.Equal(t, Order{ID: first.o.ID, Item: "book", Qty: 1}, first.o)
	second := e.call(keyed("k1"), "book")
	require.NoError(t, second.err)
	assert.True(t, second.replayed)
	assert.Equal(t, first.o, second.o)
	assert.Equal(t, 2, e.count(t, "orders"), "the old row and one order")
	assert.Equal(t, int64(1), e.claimed.Load())
	assert.Equal(t, int64(1), e.replayed.Load())

	var scope, key string
	var stored []byte
	require.NoError(t, e.db.Pool.QueryRow(context.Background(),
		`SELECT idempotency_scope, idempotency_key, idempotency_fingerprint FROM orders WHERE id = $1`, first.o.ID).Scan(&scope, &key, &stored))
	assert.Equal(t, "", scope)
	assert.Equal(t, "k1", key)
	assert.Equal(t, fp("book"), stored)
}

func TestInlineTwinsWriteOneRow(t *testing.T) {
	e := newInlineEnv(t)
	res := idemtest.Twins(t, func(int) orderResult { return e.call(keyed("twin"), "book") })
	require.NoError(t, res[0].err)
	require.NoError(t, res[1].err)
	assert.Equal(t, res[0].o, res[1].o)
	assert.NotEqual(t, res[0].replayed, res[1].replayed, "exactly one twin is a replay")
	assert.Equal(t, 1, e.keyed(t))
}

func TestInlineStormWritesOneRow(t *testing.T) {
	e := newInlineEnv(t)
	res := idemtest.Storm(t, 32, func(int) orderResult { return e.call(keyed("storm"), "book") })
	replays := 0
	for i, r := range res {
		require.NoError(t, r.err, "call %d", i)
		assert.Equal(t, res[0].o, r.o, "call %d", i)
		if r.replayed {
			replays++
		}
	}
	assert.Equal(t, 31, replays)
	assert.Equal(t, 1, e.keyed(t))
	assert.Equal(t, int64(1), e.claimed.Load())
}

// The twin's INSERT blocks on the unique index while the first attempt is
// open, gets the index's violation once it commits, and replays.
func TestInlineTwinBlocksOnTheIndexThenReplays(t *testing.T) {
	e := newInlineEnv(t)
	inserted, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		o, err := createOrder("book", 1)(ctx, tx)
		close(inserted)
		<-release
		return o, err
	}
	firstDone := make(chan orderResult)
	go func() {
		ctx, oc := idem.ContextWithOutcome(keyed("block"))
		o, err := idem.Inline(ctx, e.store, e.om, fp("book"), orderByKey, slow)
		firstDone <- orderResult{o, err, oc.Replayed()}
	}()
	<-inserted
	twinDone := make(chan orderResult)
	go func() { twinDone <- e.call(keyed("block"), "book") }()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		return waiting > 0
	}, 30*time.Second, 5*time.Millisecond, "the twin waits on the first attempt's index entry")
	close(release)
	first, twin := <-firstDone, <-twinDone
	require.NoError(t, first.err)
	require.NoError(t, twin.err)
	assert.False(t, first.replayed)
	assert.True(t, twin.replayed)
	assert.Equal(t, first.o, twin.o)
	assert.Equal(t, 1, e.keyed(t))
}

func TestInlineMismatch(t *testing.T) {
	e := newInlineEnv(t)
	require.NoError(t, e.call(keyed("k"), "book").err)
	r := e.call(keyed("k"), "lamp")
	require.ErrorIs(t, r.err, idem.ErrMismatch)
	var me *idem.MismatchError
	require.ErrorAs(t, r.err, &me)
	assert.Equal(t, "Test.CreateOrder", me.Method)
	assert.Equal(t, fp("book"), me.Stored)
	assert.Equal(t, fp("lamp"), me.Got)
	assert.Equal(t, 1, e.keyed(t))
	assert.Equal(t, int64(1), e.mismatches.Load())
}

func TestInlineScopesAreIndependent(t *testing.T) {
	e := newInlineEnv(t)
	a := e.call(idem.ContextWithScope(keyed("k"), "tenant-a"), "book")
	b := e.call(idem.ContextWithScope(keyed("k"), "tenant-b"), "book")
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	assert.False(t, b.replayed, "the same key in another scope is another request")
	assert.NotEqual(t, a.o.ID, b.o.ID)
	assert.Equal(t, 2, e.keyed(t))
	again := e.call(idem.ContextWithScope(keyed("k"), "tenant-b"), "book")
	require.NoError(t, again.err)
	assert.True(t, again.replayed)
	assert.Equal(t, b.o, again.o)
}

func TestInlineExpiredKeyIsNew(t *testing.T) {
	e := newInlineEnv(t)
	first := e.call(keyed("old"), "book")
	require.NoError(t, first.err)
	e.age(t, retention+time.Second)
	second := e.call(keyed("old"), "lamp") // another request: no mismatch after the window
	require.NoError(t, second.err)
	assert.False(t, second.replayed)
	assert.NotEqual(t, first.o.ID, second.o.ID)
	assert.Equal(t, 3, e.count(t, "orders"), "the old order stays")
	assert.Equal(t, 1, e.keyed(t), "only the new order holds the key")
	assert.Equal(t, int64(1), e.takenOver.Load())
}

func TestInlineSweepClearsExpiredKeysKeepsRows(t *testing.T) {
	e := newInlineEnv(t)
	for i := range 5 {
		require.NoError(t, e.call(keyed(fmt.Sprintf("k%d", i)), "book").err)
	}
	n, err := idem.SweepInline(context.Background(), e.store, e.om, 2)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing has expired yet")
	e.age(t, retention+time.Second)
	require.NoError(t, e.call(keyed("fresh"), "book").err)
	n, err = idem.SweepInline(context.Background(), e.store, e.om, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(5), n)
	assert.Equal(t, int64(3), e.swept.Load(), "batches of 2, 2 and 1")
	assert.Equal(t, 7, e.count(t, "orders"), "rows are never deleted")
	assert.Equal(t, 1, e.keyed(t), "the fresh key stays")
	var cleared int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orders
WHERE idempotency_key IS NULL AND idempotency_fingerprint IS NULL AND idempotency_claimed_at IS NULL`).Scan(&cleared))
	assert.Equal(t, 6, cleared)
	var scoped int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orders
WHERE idempotency_key IS NULL AND idempotency_scope IS NOT NULL`).Scan(&scoped))
	assert.Equal(t, 5, scoped, "a swept row keeps its scope, the row's tenant")
	r := e.call(keyed("k0"), "lamp")
	require.NoError(t, r.err, "a swept key is free again")
	assert.False(t, r.replayed)
}

func TestInlineBodyThatForgetsTheKeyIsRefused(t *testing.T) {
	e := newInlineEnv(t)
	forgets := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		var o Order
		err := tx.QueryRow(ctx, `INSERT INTO orders (item, qty) VALUES ('book', 1) RETURNING id`).Scan(&o.ID)
		return o, err
	}
	_, err := idem.Inline(keyed("k"), e.store, e.om, fp("book"), orderByKey, forgets)
	require.ErrorIs(t, err, idem.ErrKeyNotWritten)
	assert.Contains(t, err.Error(), "idempotency_key")

	wrongFingerprint := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		_, err := tx.Exec(ctx, `INSERT INTO orders (item, qty, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ('book', 1, $1, $2, '\x00')`, k.Scope, k.Key)
		return Order{}, err
	}
	_, err = idem.Inline(keyed("k"), e.store, e.om, fp("book"), orderByKey, wrongFingerprint)
	require.ErrorIs(t, err, idem.ErrKeyNotWritten)

	nothing := func(context.Context, pgx.Tx) (Order, error) { return Order{}, nil }
	_, err = idem.Inline(keyed("k"), e.store, e.om, fp("book"), orderByKey, nothing)
	require.ErrorIs(t, err, idem.ErrKeyNotWritten)

	assert.Equal(t, 1, e.count(t, "orders"), "every refused body rolled back")
	require.NoError(t, e.call(keyed("k"), "book").err, "and the key is still free")
}

func TestInlineFailingBodyLeavesNothing(t *testing.T) {
	e := newInlineEnv(t)
	boom := errors.New("boom")
	fails := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		if _, err := createOrder("book", 1)(ctx, tx); err != nil {
			return Order{}, err
		}
		return Order{}, boom
	}
	_, err := idem.Inline(keyed("k"), e.store, e.om, fp("book"), orderByKey, fails)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, e.keyed(t))
	r := e.call(keyed("k"), "book")
	require.NoError(t, r.err)
	assert.False(t, r.replayed, "a retry after a failure runs again")
}

// Only a violation of the idempotency index is a refused claim; the work's
// own unique constraints are the work's errors.
func TestInlineOtherUniqueViolationIsTheBodysError(t *testing.T) {
	e := newInlineEnv(t)
	withRef := func(ref string) func(context.Context, pgx.Tx) (Order, error) {
		return func(ctx context.Context, tx pgx.Tx) (Order, error) {
			k, _ := idem.InlineKeyFrom(ctx)
			_, err := tx.Exec(ctx, `INSERT INTO orders (item, qty, ref, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ('book', 1, $1, $2, $3, $4)`, ref, k.Scope, k.Key, k.Fingerprint)
			return Order{}, err
		}
	}
	_, err := idem.Inline(keyed("a"), e.store, e.om, fp("book"), orderByKey, withRef("r1"))
	require.NoError(t, err)
	_, err = idem.Inline(keyed("b"), e.store, e.om, fp("book"), orderByKey, withRef("r1"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, idem.ErrMismatch)
	assert.Contains(t, err.Error(), "orders_ref_key")
	assert.Equal(t, int64(0), e.replayed.Load())
}

// The claim is decided by the index, not by what the method does with the
// violation: a body that swallows it still gets the replay.
func TestInlineSwallowedViolationStillReplays(t *testing.T) {
	e := newInlineEnv(t)
	first := e.call(keyed("k"), "book")
	require.NoError(t, first.err)
	swallows := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		_, _ = createOrder("book", 1)(ctx, tx)
		return Order{ID: -1}, nil
	}
	ctx, oc := idem.ContextWithOutcome(keyed("k"))
	got, err := idem.Inline(ctx, e.store, e.om, fp("book"), orderByKey, swallows)
	require.NoError(t, err)
	assert.True(t, oc.Replayed())
	assert.Equal(t, first.o, got)
}

func TestInlineInTx(t *testing.T) {
	e := newInlineEnv(t)
	ctx := context.Background()
	inTx := func(key, item string) (Order, error) {
		tx, err := e.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		o, err := idem.InlineInTx(keyed(key), e.store, tx, e.om, fp(item), orderByKey, createOrder(item, 1))
		// The caller's transaction is usable whatever happened.
		_, xerr := tx.Exec(ctx, `INSERT INTO orders (item, qty) VALUES ('caller', 1)`)
		require.NoError(t, xerr)
		require.NoError(t, tx.Commit(ctx))
		return o, err
	}
	first, err := inTx("k", "book")
	require.NoError(t, err)
	again, err := inTx("k", "book")
	require.NoError(t, err)
	assert.Equal(t, first, again)
	_, err = inTx("k", "lamp")
	require.ErrorIs(t, err, idem.ErrMismatch)
	tx, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	forgets := func(ctx context.Context, tx pgx.Tx) (Order, error) {
		_, err := tx.Exec(ctx, `INSERT INTO orders (item, qty) VALUES ('forgot', 1)`)
		return Order{}, err
	}
	_, err = idem.InlineInTx(keyed("other"), e.store, tx, e.om, fp("book"), orderByKey, forgets)
	require.ErrorIs(t, err, idem.ErrKeyNotWritten)
	require.NoError(t, tx.Commit(ctx), "the savepoint took the forgotten row back; the caller's transaction is fine")
	assert.Equal(t, 1, e.keyed(t))
	assert.Equal(t, 5, e.count(t, "orders"), "the old row, one order, three caller rows")
}

func TestInlineRoundTrips(t *testing.T) {
	tc := &tripCounter{}
	db := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(t)...), idemtest.WithPoolConfig(func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = tc
		c.MaxConns = 1
	}))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := ordersMethod()
	ctx := context.Background()
	measure := func(f func()) int64 {
		before := tc.n.Load()
		f()
		return tc.n.Load() - before
	}
	i := 0
	plain := func() { // the same INSERT, without idempotency
		i++
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = insertOrder(ctx, tx, idem.InlineKey{Key: fmt.Sprintf("plain-%d", i), Fingerprint: fp("book")}, "book", 1)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	claimed := func(key string) func() {
		return func() {
			_, err := idem.Inline(keyed(key), s, m, fp("book"), orderByKey, createOrder("book", 1))
			require.NoError(t, err)
		}
	}
	plain()
	claimed("warm")()
	claimed("warm")()

	base := measure(plain)
	claim := measure(claimed("new"))
	replay := measure(claimed("new"))
	t.Logf("round trips: plain=%d claimed=%d replay=%d", base, claim, replay)
	assert.Equal(t, int64(3), base, "BEGIN, INSERT, COMMIT")
	assert.LessOrEqual(t, claim, base, "the claimed path costs no more round trips than the bare work")
	assert.LessOrEqual(t, replay, int64(2), "a replay is at most two round trips")
}

// TestInlineInTxTwinsMeet: two callers run InlineInTx with the same key in
// their own transactions at once. The first is held after its claim (inside
// its caller's open transaction) until the twin is blocked on the unique
// index (idemtest.Meeting); the twin then gets the index's violation, rolls
// back to its savepoint, replays, and its caller's transaction goes on.
func TestInlineInTxTwinsMeet(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(t)...))
	meeting := idemtest.NewMeeting(db, 2)
	s, err := idem.NewStore(db.Pool, idem.WithHooks(idem.Hooks{Claimed: func(ctx context.Context, _ idem.Event) { meeting.Claimed(ctx) }}))
	require.NoError(t, err)
	om := ordersMethod()
	res := idemtest.Twins(t, func(i int) orderResult {
		ctx, oc := idem.ContextWithOutcome(idemtest.Caller(keyed("twin"), i))
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			return orderResult{err: err}
		}
		defer func() { _ = tx.Rollback(ctx) }()
		o, err := idem.InlineInTx(ctx, s, tx, om, fp("book"), orderByKey, createOrder("book", 1))
		if err != nil {
			return orderResult{err: err}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (item, qty) VALUES ('caller', 1)`); err != nil {
			return orderResult{err: fmt.Errorf("the caller's transaction after the call: %w", err)}
		}
		return orderResult{o, tx.Commit(ctx), oc.Replayed()}
	})
	met, others := meeting.Met()
	assert.Equal(t, 1, others)
	assert.Equal(t, 1, met, "the twin was blocked on the index while the first held its claim")
	require.NoError(t, res[0].err)
	require.NoError(t, res[1].err)
	assert.Equal(t, res[0].o, res[1].o)
	assert.NotEqual(t, res[0].replayed, res[1].replayed, "exactly one twin is a replay")
	var keyed, callers int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE idempotency_key IS NOT NULL), count(*) FILTER (WHERE item = 'caller') FROM orders`).Scan(&keyed, &callers))
	assert.Equal(t, 1, keyed, "one order carries the key")
	assert.Equal(t, 2, callers, "both callers' transactions committed their own rows")
}
