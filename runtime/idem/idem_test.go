package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// Receipt is the response of the test method.
type Receipt struct {
	PaymentID int64
	Amount    int64
	Note      string
	Tags      []string
}

var errDeclined = errors.New("card declined")

const retention = time.Hour

func chargeMethod() *idem.Method[Receipt] {
	return &idem.Method[Receipt]{
		Name:        "Test.Charge",
		Retention:   retention,
		FinalErrors: []idem.FinalError{{Name: "errDeclined", Err: errDeclined}},
	}
}

const paymentsDDL = `CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`

// env is one fresh database with a store whose hooks count what happened.
type env struct {
	db    *idemtest.DB
	store *idem.Store
	clock *idemtest.Clock
	m     *idem.Method[Receipt]

	claimed, executed, replayed, mismatches, inProgress, takenOver, lockLost, swept atomic.Int64
}

func newEnv(t testing.TB, opts ...idem.Option) *env {
	t.Helper()
	return newEnvOn(t, pgxPath, opts...)
}

// newEnvOn is newEnv with the store of path p.
func newEnvOn(t testing.TB, p path, opts ...idem.Option) *env {
	t.Helper()
	e := &env{clock: idemtest.NewClock(time.Time{}), m: chargeMethod()}
	e.db = idemtest.New(t, idemtest.WithSetup(paymentsDDL))
	count := func(n *atomic.Int64) func(context.Context, idem.Event) {
		return func(context.Context, idem.Event) { n.Add(1) }
	}
	base := []idem.Option{
		idem.WithClock(e.clock.Now),
		idem.WithBackoff(time.Millisecond),
		idem.WithHooks(idem.Hooks{
			Claimed: count(&e.claimed), Executed: count(&e.executed), Replayed: count(&e.replayed),
			Mismatch: count(&e.mismatches), InProgress: count(&e.inProgress), TakenOver: count(&e.takenOver),
			LockLost: count(&e.lockLost), Swept: count(&e.swept),
		}),
	}
	s, err := p.newStore(e.db, append(base, opts...)...)
	require.NoError(t, err)
	e.store = s
	return e
}

// charge is the work: one payment row, in the transaction it is given.
func charge(amount int64) func(context.Context, pgx.Tx) (Receipt, error) {
	return func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, amount).Scan(&id); err != nil {
			return Receipt{}, err
		}
		return Receipt{PaymentID: id, Amount: amount, Note: "ok", Tags: []string{"a", "b"}}, nil
	}
}

func fp(req string) []byte {
	f := idem.NewFingerprinter("Test.Charge")
	f.Field("req")
	f.String(req)
	return f.Sum()
}

func keyed(key string) context.Context { return idem.ContextWithKey(context.Background(), key) }

// retried is keyed marked a possible retry (idem.ContextWithRetry): the
// call looks its key up before its body.
func retried(key string) context.Context { return idem.ContextWithRetry(keyed(key)) }

func (e *env) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

type result struct {
	r        Receipt
	err      error
	replayed bool
}

func (e *env) call(ctx context.Context, req string, amount int64) result {
	ctx, o := idem.ContextWithOutcome(ctx)
	r, err := idem.Atomic(ctx, e.store, e.m, fp(req), charge(amount))
	return result{r, err, o.Replayed()}
}

func TestTwinsRunOnce(t *testing.T) {
	e := newEnv(t)
	res := idemtest.Twins(t, func(int) result { return e.call(keyed("twin-1"), "100", 100) })
	require.NoError(t, res[0].err)
	require.NoError(t, res[1].err)
	assert.Equal(t, res[0].r, res[1].r, "both twins see the same receipt")
	// Twins may both run the body; one commits (one payment), the other
	// replays it.
	assert.Equal(t, 1, e.count(t, "idempotency_keys"))
	assert.Equal(t, 1, e.count(t, "payments"))
	assert.NotEqual(t, res[0].replayed, res[1].replayed, "exactly one twin is flagged as a replay")
}

func TestStormRunsOnce(t *testing.T) {
	e := newEnv(t)
	res := idemtest.Storm(t, 64, func(int) result { return e.call(keyed("storm"), "100", 100) })
	replays := 0
	for i, r := range res {
		require.NoError(t, r.err, "call %d", i)
		assert.Equal(t, res[0].r, r.r, "call %d", i)
		if r.replayed {
			replays++
		}
	}
	assert.Equal(t, 63, replays, "one call's answer is its own, every other one's a replay")
	assert.Equal(t, 1, e.count(t, "payments"))
	assert.Equal(t, 1, e.count(t, "idempotency_keys"))
}

func TestMismatch(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.call(keyed("k"), "100", 100).err)
	r := e.call(retried("k"), "200", 200)
	require.ErrorIs(t, r.err, idem.ErrMismatch)
	var me *idem.MismatchError
	require.ErrorAs(t, r.err, &me)
	assert.Equal(t, "Test.Charge", me.Method)
	assert.Equal(t, "k", me.Key)
	assert.Equal(t, fp("100"), me.Stored)
	assert.Equal(t, fp("200"), me.Got)
	assert.Contains(t, r.err.Error(), fmt.Sprintf("%x…", fp("100")[:6]))
	assert.Equal(t, int64(1), e.executed.Load())
	assert.Equal(t, int64(1), e.mismatches.Load())
}

func TestDistinctKeysAndScopes(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.call(keyed("a"), "100", 100).err)
	require.NoError(t, e.call(keyed("b"), "100", 100).err)
	tenant := idem.ContextWithScope(keyed("a"), "tenant-2")
	r := e.call(tenant, "100", 100)
	require.NoError(t, r.err)
	assert.False(t, r.replayed, "a key in another scope is another request")
	assert.Equal(t, int64(3), e.executed.Load())
	assert.Equal(t, 3, e.count(t, "payments"))
	// And each scope replays its own response.
	r2 := e.call(idem.ContextWithScope(keyed("a"), "tenant-2"), "100", 100)
	assert.True(t, r2.replayed)
	assert.Equal(t, r.r, r2.r)
}

func TestExpiredKeyIsNew(t *testing.T) {
	e := newEnv(t)
	first := e.call(keyed("old"), "100", 100)
	require.NoError(t, first.err)
	e.clock.Advance(retention - time.Second)
	assert.True(t, e.call(retried("old"), "100", 100).replayed, "inside the window: replay")
	e.clock.Advance(2 * time.Second)
	// Unmarked, the call is taken for a first attempt: its record is
	// refused by the expired row, and the attempt that follows looks the
	// key up and takes it over.
	again := e.call(keyed("old"), "100", 100)
	require.NoError(t, again.err)
	assert.False(t, again.replayed, "after the window the key is new")
	assert.NotEqual(t, first.r.PaymentID, again.r.PaymentID)
	assert.Equal(t, int64(3), e.executed.Load(), "the first run, the refused one, the takeover")
	assert.Equal(t, int64(1), e.takenOver.Load())
	assert.Equal(t, 1, e.count(t, "idempotency_keys"))
	// A different request after expiry is new too, not a mismatch.
	e.clock.Advance(retention)
	require.NoError(t, e.call(keyed("old"), "300", 300).err)
}

func TestFailingBodyLeavesNothing(t *testing.T) {
	e := newEnv(t)
	boom := errors.New("boom")
	_, err := idem.Atomic(keyed("f"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		_, err := charge(100)(ctx, tx)
		require.NoError(t, err)
		return Receipt{}, boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
	assert.Equal(t, 0, e.count(t, "payments"))
	r := e.call(keyed("f"), "100", 100)
	require.NoError(t, r.err)
	assert.False(t, r.replayed, "the retry runs again")
	assert.Equal(t, 1, e.count(t, "payments"))
}

func TestFinalErrorReplayed(t *testing.T) {
	e := newEnv(t)
	decline := func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		return Receipt{}, fmt.Errorf("card 4242: %w", errDeclined)
	}
	ctx, o := idem.ContextWithOutcome(keyed("d"))
	_, err := idem.Atomic(ctx, e.store, e.m, fp("100"), decline)
	require.ErrorIs(t, err, errDeclined)
	assert.False(t, o.Replayed())
	_, err = idem.Atomic(idem.ContextWithRetry(ctx), e.store, e.m, fp("100"), decline)
	require.ErrorIs(t, err, errDeclined, "errors.Is holds on replay")
	assert.Equal(t, "card 4242: card declined", err.Error())
	var re *idem.ReplayedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "errDeclined", re.Name)
	assert.True(t, o.Replayed())
	assert.Equal(t, int64(1), e.executed.Load())
}

func TestPanicRollsBackAndPropagates(t *testing.T) {
	e := newEnv(t)
	require.PanicsWithValue(t, "kaboom", func() {
		_, _ = idem.Atomic(keyed("p"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
			_, err := charge(100)(ctx, tx)
			require.NoError(t, err)
			panic("kaboom")
		})
	})
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
	assert.Equal(t, 0, e.count(t, "payments"))
	require.NoError(t, e.call(keyed("p"), "100", 100).err)
}

func TestBodyMustNotEndTransaction(t *testing.T) {
	e := newEnv(t)
	_, err := idem.Atomic(keyed("c"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		r, err := charge(100)(ctx, tx)
		_ = tx.Commit(ctx)
		return r, err
	})
	require.Error(t, err)
	assert.Equal(t, 0, e.count(t, "payments"))
}

func TestNestedSavepointInBody(t *testing.T) {
	e := newEnv(t)
	_, err := idem.Atomic(keyed("n"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		sub, err := tx.Begin(ctx)
		require.NoError(t, err)
		_, err = sub.Exec(ctx, `INSERT INTO payments (amount) VALUES (1)`)
		require.NoError(t, err)
		require.NoError(t, sub.Rollback(ctx))
		return charge(100)(ctx, tx)
	})
	require.NoError(t, err)
	assert.Equal(t, 1, e.count(t, "payments"))
}

func TestInTx(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, e.call(keyed("in"), "100", 100).err)

	tx, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO payments (amount) VALUES (7)`)
	require.NoError(t, err)
	// A refused claim (mismatch) leaves the caller's transaction usable.
	_, err = idem.AtomicInTx(keyed("in"), e.store, tx, e.m, fp("999"), charge(999))
	require.ErrorIs(t, err, idem.ErrMismatch)
	// A failing body rolls back to the savepoint only.
	_, err = idem.AtomicInTx(keyed("in-2"), e.store, tx, e.m, fp("5"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		_, _ = tx.Exec(ctx, `SELECT 1/0`) // aborts the subtransaction
		return Receipt{}, errors.New("div")
	})
	require.Error(t, err)
	// A replay inside the transaction.
	ctxR, o := idem.ContextWithOutcome(keyed("in"))
	_, err = idem.AtomicInTx(ctxR, e.store, tx, e.m, fp("100"), charge(100))
	require.NoError(t, err)
	assert.True(t, o.Replayed())
	// A new claim commits with the caller.
	r, err := idem.AtomicInTx(keyed("in-3"), e.store, tx, e.m, fp("8"), charge(8))
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO payments (amount) VALUES (9)`)
	require.NoError(t, err, "the caller's transaction is still usable")
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, 4, e.count(t, "payments")) // 100, 7, 8, 9
	again := e.call(keyed("in-3"), "8", 8)
	assert.True(t, again.replayed)
	assert.Equal(t, r, again.r)
	assert.Equal(t, 2, e.count(t, "idempotency_keys"))
}

func TestSerializationFailureRetried(t *testing.T) {
	e := newEnv(t)
	var attempts atomic.Int64
	r, err := idem.Atomic(keyed("s"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		out, err := charge(100)(ctx, tx)
		if err != nil || attempts.Add(1) > 1 {
			return out, err
		}
		// A real 40001 from the server, as SERIALIZABLE would raise it.
		_, err = tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = 'serialization_failure'; END $$`)
		return out, err
	})
	require.NoError(t, err)
	assert.Equal(t, int64(2), attempts.Load())
	assert.Equal(t, 1, e.count(t, "payments"), "the failed attempt rolled back")
	assert.Equal(t, int64(100), r.Amount)
}

func TestSerializationRetriesAreBounded(t *testing.T) {
	e := newEnv(t, idem.WithMaxAttempts(3))
	_, err := idem.Atomic(keyed("s"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$`)
		return Receipt{}, err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "40P01", pgErr.Code)
	assert.Equal(t, int64(3), e.executed.Load())
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
}

func TestKeyValidation(t *testing.T) {
	e := newEnv(t)
	_, err := idem.Atomic(context.Background(), e.store, e.m, fp("1"), charge(1))
	require.ErrorIs(t, err, idem.ErrNoKey)
	_, err = idem.Atomic(keyed("bad\nkey"), e.store, e.m, fp("1"), charge(1))
	require.ErrorIs(t, err, idem.ErrInvalidKey)
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, err.Error(), "byte 4 (0x0a)")
	assert.Equal(t, int64(0), e.executed.Load())
}

// TestRefusedRecordRollsBackTheWork: a request with another fingerprint
// commits the key while the body runs (after its lookup found the key
// free). The record statement matches no row, so the pipelined COMMIT must
// not commit the body's work, and the lookup after it answers: a mismatch.
//
// The other request runs before the body's first statement, which the
// key's lock travels with (pgx): it does not wait for the body.
func TestRefusedRecordRollsBackTheWork(t *testing.T) {
	e := newEnv(t)
	_, err := idem.Atomic(keyed("taken"), e.store, e.m, fp("100"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		other, err := idem.Atomic(keyed("taken"), e.store, e.m, fp("999"), charge(999))
		require.NoError(t, err, "the other request, on another connection")
		require.EqualValues(t, 999, other.Amount)
		r, err := charge(100)(ctx, tx)
		require.NoError(t, err)
		return r, nil
	})
	require.ErrorIs(t, err, idem.ErrMismatch)
	assert.Equal(t, 1, e.count(t, "payments"), "the other request's: the refused work rolled back")
	assert.Equal(t, int64(2), e.executed.Load(), "not retried: the lookup answered")
}

// TestLostRecordReplays: a twin commits the key while the body runs,
// before its first statement; the body's record is refused, its work rolls
// back, and it answers with the twin's response, as a replay. On
// database/sql the key's lock is taken before the body runs: the twin
// waits for it, and is told the key is in progress (twinDuringBody).
func TestLostRecordReplays(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithClaimWait(50*time.Millisecond))
			var twin result
			ctx, o := idem.ContextWithOutcome(keyed("race"))
			r, err := p.atomic(ctx, e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
				twin = e.callOn(p, keyed("race"), "100", 100)
				if twinDuringBody(t, p, twin.err) {
					return Receipt{}, errSkipTwin
				}
				require.NoError(t, twin.err, "the twin, on another connection")
				return chargeOn(100)(ctx, q)
			})
			if errors.Is(err, errSkipTwin) {
				return
			}
			require.NoError(t, err)
			assert.True(t, o.Replayed(), "the lost record is answered by a replay")
			assert.False(t, twin.replayed)
			assert.Equal(t, twin.r, r, "the twin's response")
			assert.Equal(t, 1, e.count(t, "payments"), "the twin's: the lost work rolled back")
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
		})
	}
}

// TestLostRecordInTxBodySentNothing: in the caller's transaction, a body
// that sends nothing has its savepoint sent with the record statement;
// when a twin recorded the key meanwhile, the record is refused, the
// savepoint rolled back, and the caller's transaction stays usable.
func TestLostRecordInTxBodySentNothing(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithClaimWait(50*time.Millisecond))
			ctx := context.Background()
			tx, err := p.begin(ctx, e.db)
			require.NoError(t, err)
			defer func() { _ = tx.rollback(ctx) }()
			var twin result
			octx, o := idem.ContextWithOutcome(keyed("nothing"))
			r, err := p.atomicInTx(octx, e.store, tx, e.m, fp("100"), func(context.Context, stmts) (Receipt, error) {
				twin = e.callOn(p, keyed("nothing"), "100", 100)
				if twinDuringBody(t, p, twin.err) {
					return Receipt{}, errSkipTwin
				}
				require.NoError(t, twin.err)
				return Receipt{Note: "sent nothing"}, nil
			})
			if errors.Is(err, errSkipTwin) {
				require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (7)`), "the caller's transaction is usable")
				return
			}
			require.NoError(t, err)
			assert.True(t, o.Replayed())
			assert.Equal(t, twin.r, r)
			require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (7)`), "the caller's transaction is usable")
			require.NoError(t, tx.commit(ctx))
			assert.Equal(t, 2, e.count(t, "payments"), "the twin's and the caller's own")
		})
	}
}

// TestBodyErrorAfterTwinReplays: the twin's committed work makes the body
// fail (a unique business key); the error is not returned: the lookup
// after it finds the twin's row and replays its answer.
func TestBodyErrorAfterTwinReplays(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithClaimWait(50*time.Millisecond))
			_, err := e.db.Pool.Exec(context.Background(), `CREATE UNIQUE INDEX payments_amount ON payments (amount)`)
			require.NoError(t, err)
			var twin result
			ctx, o := idem.ContextWithOutcome(keyed("unique"))
			r, err := p.atomic(ctx, e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
				twin = e.callOn(p, keyed("unique"), "100", 100)
				if twinDuringBody(t, p, twin.err) {
					return Receipt{}, errSkipTwin
				}
				require.NoError(t, twin.err, "the twin, on another connection")
				return chargeOn(100)(ctx, q) // a unique violation: the twin's payment
			})
			if errors.Is(err, errSkipTwin) {
				return
			}
			require.NoError(t, err, "the body's error is answered by the twin's row")
			assert.True(t, o.Replayed())
			assert.Equal(t, twin.r, r)
			assert.Equal(t, 1, e.count(t, "payments"))
		})
	}
}

// TestInTxClaimAfterASweepItsSnapshotMissed: a caller's REPEATABLE READ
// snapshot still shows an expired row that a sweep has since deleted. The
// lookup in the caller's transaction sees the expired row, which does not
// answer the call (it would be a mismatch: another fingerprint); the body
// runs, and the record statement finds the key free and records it. The
// caller commits, and the key replays.
func TestInTxClaimAfterASweepItsSnapshotMissed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	short := &idem.Method[Receipt]{Name: "Test.Short", Retention: time.Minute}
	_, err := idem.Atomic(keyed("swept"), e.store, short, fp("1"), charge(1))
	require.NoError(t, err)

	tx, err := e.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&n), "take the snapshot")
	require.Equal(t, 1, n)

	e.clock.Advance(time.Minute)
	swept, err := e.store.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), swept)

	_, err = idem.AtomicInTx(keyed("swept"), e.store, tx, short, fp("2"), charge(2))
	require.NoError(t, err, "the stale row in the snapshot does not answer the call")
	require.NoError(t, tx.Commit(ctx))

	ctxR, again := idem.ContextWithOutcome(keyed("swept"))
	replayed, err := idem.Atomic(ctxR, e.store, short, fp("2"), charge(2))
	require.NoError(t, err)
	assert.True(t, again.Replayed())
	assert.Equal(t, int64(2), replayed.Amount)
	assert.Equal(t, 2, e.count(t, "payments"), "the first request's and the second's")
}

// TestInTxTwinOutsideTheSnapshot: a caller's REPEATABLE READ snapshot was
// taken before a twin recorded the key. The lookup in the caller's
// transaction sees no row, and the record (AtomicInTx sends the takeover
// form only) meets the twin's row, which the snapshot cannot see:
// PostgreSQL raises a serialization failure, returned to the caller, which
// is what callers retry their transaction on. The retry replays.
func TestInTxTwinOutsideTheSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rr := pgx.TxOptions{IsoLevel: pgx.RepeatableRead}
	tx, err := e.db.Pool.BeginTx(ctx, rr)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&n), "take the snapshot")
	_, err = idem.Atomic(keyed("unseen"), e.store, e.m, fp("1"), charge(1))
	require.NoError(t, err, "the twin, on another connection")

	_, err = idem.AtomicInTx(keyed("unseen"), e.store, tx, e.m, fp("1"), charge(1))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "40001", pgErr.Code, "a serialization failure, not a unique violation")
	require.NoError(t, tx.Rollback(ctx))

	retry, err := e.db.Pool.BeginTx(ctx, rr)
	require.NoError(t, err)
	defer func() { _ = retry.Rollback(ctx) }()
	octx, o := idem.ContextWithOutcome(keyed("unseen"))
	_, err = idem.AtomicInTx(octx, e.store, retry, e.m, fp("1"), charge(1))
	require.NoError(t, err)
	assert.True(t, o.Replayed(), "the caller's retry replays the twin's answer")
	require.NoError(t, retry.Commit(ctx))
	assert.Equal(t, 1, e.count(t, "payments"), "the twin's")
}

// errSkipTwin ends a body whose twin could not run during it
// (twinDuringBody).
var errSkipTwin = errors.New("the twin waited for the key's lock")

// twinDuringBody reports whether twinErr, the answer of a twin run inside
// a body before the body's first statement, is that of path p's key lock:
// on pgx the lock travels with the body's first statement, so the twin
// runs to its end (false; twinErr is the twin's own); on database/sql it is
// taken before the body runs, so the twin waited for it and is told the key
// is in progress (true, checked here).
func twinDuringBody(t *testing.T, p path, twinErr error) bool {
	t.Helper()
	if p.name == pgxPath.name {
		return false
	}
	var ip *idem.InProgressError
	require.ErrorAs(t, twinErr, &ip, "a twin of a database/sql body, which holds the key's lock")
	return true
}
