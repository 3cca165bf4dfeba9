package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The same promises, on both paths: pgx (Atomic, Inline) and database/sql
// (Atomic, Inline with a *sql.Tx body).

func TestPathsClaimReplayMismatch(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			first := e.callOn(p, keyed("k"), "100", 100)
			require.NoError(t, first.err)
			assert.False(t, first.replayed)
			again := e.callOn(p, retried("k"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.Equal(t, first.r, again.r, "the replay is the stored response")
			other := e.callOn(p, retried("k"), "200", 200)
			var me *idem.MismatchError
			require.ErrorAs(t, other.err, &me)
			assert.Equal(t, fp("100"), me.Stored)
			assert.Equal(t, int64(1), e.executed.Load())
			assert.Equal(t, 1, e.count(t, "payments"))
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
		})
	}
}

func TestPathsFinalErrorReplayedOtherErrorLeavesNothing(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			decline := func(ctx context.Context, q stmts) (Receipt, error) {
				if _, err := chargeOn(100)(ctx, q); err != nil {
					return Receipt{}, err
				}
				return Receipt{}, fmt.Errorf("card 4242: %w", errDeclined)
			}
			_, err := p.atomic(keyed("d"), e.store, e.m, fp("100"), decline)
			require.ErrorIs(t, err, errDeclined)
			ctx, o := idem.ContextWithOutcome(retried("d"))
			_, err = p.atomic(ctx, e.store, e.m, fp("100"), decline)
			require.ErrorIs(t, err, errDeclined, "errors.Is holds on replay")
			assert.True(t, o.Replayed())
			assert.Equal(t, int64(1), e.executed.Load())
			assert.Equal(t, 1, e.count(t, "payments"), "a final error commits the work with it")

			boom := errors.New("boom")
			_, err = p.atomic(keyed("f"), e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
				_, err := chargeOn(100)(ctx, q)
				require.NoError(t, err)
				return Receipt{}, boom
			})
			require.ErrorIs(t, err, boom)
			assert.Equal(t, 1, e.count(t, "payments"), "another error rolls the work back")
			assert.Equal(t, 1, e.count(t, "idempotency_keys"))
			r := e.callOn(p, keyed("f"), "100", 100)
			require.NoError(t, r.err)
			assert.False(t, r.replayed, "the retry runs again")
		})
	}
}

func TestPathsInTxStaysUsable(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			ctx := context.Background()
			require.NoError(t, e.callOn(p, keyed("in"), "100", 100).err)

			tx, err := p.begin(ctx, e.db)
			require.NoError(t, err)
			defer func() { _ = tx.rollback(ctx) }()
			require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (7)`))
			// A refused claim (mismatch) leaves the caller's transaction usable.
			_, err = p.atomicInTx(keyed("in"), e.store, tx, e.m, fp("999"), chargeOn(999))
			require.ErrorIs(t, err, idem.ErrMismatch)
			// A failing body rolls back to the savepoint only.
			_, err = p.atomicInTx(keyed("in-2"), e.store, tx, e.m, fp("5"), func(ctx context.Context, q stmts) (Receipt, error) {
				return Receipt{}, q.exec(ctx, `SELECT 1/0`)
			})
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			assert.Equal(t, "22012", pgErr.Code)
			// A replay inside the transaction.
			ctxR, o := idem.ContextWithOutcome(keyed("in"))
			_, err = p.atomicInTx(ctxR, e.store, tx, e.m, fp("100"), chargeOn(100))
			require.NoError(t, err)
			assert.True(t, o.Replayed())
			// A new claim commits with the caller.
			r, err := p.atomicInTx(keyed("in-3"), e.store, tx, e.m, fp("8"), chargeOn(8))
			require.NoError(t, err)
			require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (9)`), "the caller's transaction is still usable")
			require.NoError(t, tx.commit(ctx))
			assert.Equal(t, 4, e.count(t, "payments")) // 100, 7, 8, 9
			again := e.callOn(p, keyed("in-3"), "8", 8)
			assert.True(t, again.replayed)
			assert.Equal(t, r, again.r)
			assert.Equal(t, 2, e.count(t, "idempotency_keys"))
		})
	}
}

func TestPathsStormRunsOnce(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			res := idemtest.Storm(t, 32, func(int) result { return e.callOn(p, keyed("storm"), "100", 100) })
			replays := 0
			for i, r := range res {
				require.NoError(t, r.err, "call %d", i)
				assert.Equal(t, res[0].r, r.r, "call %d", i)
				if r.replayed {
					replays++
				}
			}
			// Every call may run the body; one commits its work.
			assert.Equal(t, len(res)-1, replays, "one call's answer is its own, every other one's a replay")
			assert.Equal(t, 1, e.count(t, "payments"))
		})
	}
}

// TestPathsTwinWaitsWithinClaimWait: a twin whose holder has recorded the
// key and not committed (in the caller's transaction, held open by the
// test, not by a sleep) is told the key is in progress once the claim wait
// ends, having done no work; once the holder commits, the twin replays.
func TestPathsTwinWaitsWithinClaimWait(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithClaimWait(50*time.Millisecond))
			recorded, release := make(chan struct{}), make(chan struct{})
			done := make(chan result, 1)
			go func() {
				ctx := context.Background()
				tx, err := p.begin(ctx, e.db)
				if err != nil {
					close(recorded)
					done <- result{err: err}
					return
				}
				r, err := p.atomicInTx(keyed("held"), e.store, tx, e.m, fp("100"), chargeOn(100))
				close(recorded)
				<-release
				if err == nil {
					err = tx.commit(ctx)
				} else {
					_ = tx.rollback(ctx)
				}
				done <- result{r, err, false}
			}()
			<-recorded
			twin := e.callOn(p, keyed("held"), "100", 100)
			var ip *idem.InProgressError
			require.ErrorAs(t, twin.err, &ip, "the holder has not committed")
			close(release)
			first := <-done
			require.NoError(t, first.err)
			after := e.callOn(p, retried("held"), "100", 100)
			require.NoError(t, after.err)
			assert.True(t, after.replayed)
			assert.Equal(t, first.r, after.r)
			assert.Equal(t, 1, e.count(t, "payments"), "the twin's work rolled back")
			// The twin waited on the key's lock before any work of its own:
			// on pgx the lock goes with its body's first statement, which
			// failed; on database/sql it is taken before the body is called.
			want := map[string]int64{pgxPath.name: 2, sqlPath.name: 1}[p.name]
			assert.Equal(t, want, e.executed.Load(), "bodies called")
		})
	}
}

func TestPathsSerializationFailureRetried(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			var attempts atomic.Int64
			r, err := p.atomic(keyed("s"), e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
				out, err := chargeOn(100)(ctx, q)
				if err != nil || attempts.Add(1) > 1 {
					return out, err
				}
				return out, q.exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = 'serialization_failure'; END $$`)
			})
			require.NoError(t, err)
			assert.Equal(t, int64(2), attempts.Load())
			assert.Equal(t, 1, e.count(t, "payments"), "the failed attempt rolled back")
			assert.Equal(t, int64(100), r.Amount)

			_, err = p.atomic(keyed("d"), e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
				return Receipt{}, q.exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$`)
			})
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			assert.Equal(t, "40P01", pgErr.Code)
			assert.Equal(t, int64(2+idem.DefaultMaxAttempts), e.executed.Load(), "a deadlock is retried up to the store's attempts")
		})
	}
}

func TestPathsInline(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newInlineEnvOn(t, p)
			order := func(ctx context.Context, item string) orderResult {
				ctx, o := idem.ContextWithOutcome(ctx)
				r, err := p.inline(ctx, e.store, e.om, fp(item), createOrderOn(item, 1))
				return orderResult{r, err, o.Replayed()}
			}
			first := order(keyed("k1"), "book")
			require.NoError(t, first.err)
			assert.False(t, first.replayed)
			again := order(keyed("k1"), "book")
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.Equal(t, first.o, again.o)
			_, err := p.inline(keyed("k1"), e.store, e.om, fp("pen"), createOrderOn("pen", 1))
			require.ErrorIs(t, err, idem.ErrMismatch)

			res := idemtest.Storm(t, 16, func(int) orderResult { return order(keyed("k2"), "lamp") })
			for i, r := range res {
				require.NoError(t, r.err, "call %d", i)
				assert.Equal(t, res[0].o, r.o, "call %d", i)
			}
			assert.Equal(t, 2, e.keyed(t), "one row per key")

			_, err = p.inline(keyed("k3"), e.store, e.om, fp("cup"), func(ctx context.Context, q stmts) (Order, error) {
				return Order{}, q.exec(ctx, `INSERT INTO orders (item, qty) VALUES ('no key', 1)`)
			})
			require.ErrorIs(t, err, idem.ErrKeyNotWritten)
			assert.Equal(t, 2, e.keyed(t))
		})
	}
}

func TestPathsInlineInTx(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newInlineEnvOn(t, p)
			ctx := context.Background()
			first, err := p.inline(keyed("k"), e.store, e.om, fp("book"), createOrderOn("book", 1))
			require.NoError(t, err)

			tx, err := p.begin(ctx, e.db)
			require.NoError(t, err)
			defer func() { _ = tx.rollback(ctx) }()
			// A refused claim (mismatch) leaves the caller's transaction usable.
			_, err = p.inlineInTx(keyed("k"), e.store, tx, e.om, fp("pen"), createOrderOn("pen", 1))
			require.ErrorIs(t, err, idem.ErrMismatch)
			// A replay inside it.
			rctx, o := idem.ContextWithOutcome(keyed("k"))
			replayed, err := p.inlineInTx(rctx, e.store, tx, e.om, fp("book"), createOrderOn("book", 1))
			require.NoError(t, err)
			assert.True(t, o.Replayed())
			assert.Equal(t, first, replayed)
			// A failing body rolls back to the savepoint only.
			_, err = p.inlineInTx(keyed("k2"), e.store, tx, e.om, fp("cup"), func(ctx context.Context, q stmts) (Order, error) {
				return Order{}, q.exec(ctx, `SELECT 1/0`)
			})
			require.Error(t, err)
			// A new claim commits with the caller.
			_, err = p.inlineInTx(keyed("k3"), e.store, tx, e.om, fp("lamp"), createOrderOn("lamp", 1))
			require.NoError(t, err)
			require.NoError(t, tx.exec(ctx, `INSERT INTO orders (item, qty) VALUES ('after', 1)`), "the caller's transaction is still usable")
			require.NoError(t, tx.commit(ctx))
			assert.Equal(t, 2, e.keyed(t))
		})
	}
}

// TestSQLStoreServesExternalAndSweeps: External, Sweep, SweepInline and
// the janitor's SweepAll work on a store made by NewSQLStore.
func TestSQLStoreServesExternalAndSweeps(t *testing.T) {
	e := newEnvOn(t, sqlPath)
	ctx := context.Background()
	var calls atomic.Int64
	ext := func(ctx context.Context) (Receipt, error) {
		n := calls.Add(1)
		return Receipt{PaymentID: n, Note: "bank"}, nil
	}
	first, err := idem.External(keyed("x"), e.store, e.m, fp("1"), ext)
	require.NoError(t, err)
	rctx, o := idem.ContextWithOutcome(keyed("x"))
	again, err := idem.External(rctx, e.store, e.m, fp("1"), ext)
	require.NoError(t, err)
	assert.True(t, o.Replayed())
	assert.Equal(t, first, again)
	assert.Equal(t, int64(1), calls.Load())
	_, err = idem.External(keyed("x"), e.store, e.m, fp("2"), ext)
	require.ErrorIs(t, err, idem.ErrMismatch)
	_, err = idem.External(keyed("y"), e.store, e.m, fp("1"), func(ctx context.Context) (Receipt, error) {
		return Receipt{}, fmt.Errorf("card: %w", errDeclined)
	})
	require.ErrorIs(t, err, errDeclined)
	require.Equal(t, 2, e.count(t, "idempotency_keys"))

	e.clock.Advance(retention + time.Minute)
	n, err := e.store.Sweep(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the sweep deletes the expired rows")
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
}

func TestSQLStoreSweepsInlineKeys(t *testing.T) {
	e := newInlineEnvOn(t, sqlPath)
	ctx := context.Background()
	_, err := sqlPath.inline(keyed("k"), e.store, e.om, fp("book"), createOrderOn("book", 1))
	require.NoError(t, err)
	idem.RegisterInline(e.store, e.om)
	e.age(t, retention+time.Minute)
	n, err := e.store.SweepAll(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, 0, e.keyed(t), "the key is off its row")
}

// notPgx is a database/sql driver that is not pgx's: the store refuses it
// before any connection is made (internal/compat/drivers refuses lib/pq
// itself).
type notPgx struct{}

func (notPgx) Open(string) (driver.Conn, error) { return nil, errors.New("notPgx: never connects") }

type notPgxConnector struct{}

func (notPgxConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("notPgx: never connects")
}

func (notPgxConnector) Driver() driver.Driver { return notPgx{} }

func TestNewSQLStoreRefusesOtherDrivers(t *testing.T) {
	db := sql.OpenDB(notPgxConnector{})
	t.Cleanup(func() { _ = db.Close() })
	_, err := idem.NewSQLStore(db)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the driver idem_test.notPgx")
	assert.Contains(t, err.Error(), "*pgconn.PgError")
	assert.Contains(t, err.Error(), `the same DSN works with sql.Open("pgx", dsn)`)
	assert.NotContains(t, err.Error(), "\n")

	_, err = idem.NewSQLStore(nil)
	require.ErrorContains(t, err, "nil *sql.DB")
}

func TestWrongStoreKindFailsClosed(t *testing.T) {
	e := newEnvOn(t, pgxPath)
	sqlStore, err := idem.NewSQLStore(e.db.SQL)
	require.NoError(t, err)
	ctx := context.Background()
	assert.Nil(t, sqlStore.Pool())
	assert.Same(t, e.db.SQL, sqlStore.DB())
	assert.Nil(t, e.store.DB())

	_, err = sqlPath.atomic(keyed("a"), e.store, e.m, fp("1"), chargeOn(1))
	require.ErrorContains(t, err, "idem: Atomic: the store was made by NewStore over a pgx pool, and the body takes a *sql.Tx")
	_, err = pgxPath.atomic(keyed("a"), sqlStore, e.m, fp("1"), chargeOn(1))
	require.ErrorContains(t, err, "idem: Atomic: the store was made by NewSQLStore over a *sql.DB, and the body takes a pgx.Tx")

	ptx, err := pgxPath.begin(ctx, e.db)
	require.NoError(t, err)
	defer func() { _ = ptx.rollback(ctx) }()
	_, err = pgxPath.atomicInTx(keyed("a"), sqlStore, ptx, e.m, fp("1"), chargeOn(1))
	require.ErrorContains(t, err, "idem: AtomicInTx: the store was made by NewSQLStore")
	stx, err := sqlPath.begin(ctx, e.db)
	require.NoError(t, err)
	defer func() { _ = stx.rollback(ctx) }()
	_, err = sqlPath.atomicInTx(keyed("a"), e.store, stx, e.m, fp("1"), chargeOn(1))
	require.ErrorContains(t, err, "idem: AtomicInTx: the store was made by NewStore")

	om := ordersMethod()
	_, err = sqlPath.inline(keyed("a"), e.store, om, fp("1"), createOrderOn("x", 1))
	require.ErrorContains(t, err, "idem: Inline: the store was made by NewStore")
	_, err = pgxPath.inline(keyed("a"), sqlStore, om, fp("1"), createOrderOn("x", 1))
	require.ErrorContains(t, err, "idem: Inline: the store was made by NewSQLStore")
	_, err = pgxPath.inlineInTx(keyed("a"), sqlStore, ptx, om, fp("1"), createOrderOn("x", 1))
	require.ErrorContains(t, err, "idem: InlineInTx: the store was made by NewSQLStore")
	_, err = sqlPath.inlineInTx(keyed("a"), e.store, stx, om, fp("1"), createOrderOn("x", 1))
	require.ErrorContains(t, err, "idem: InlineInTx: the store was made by NewStore")

	// A body on any other transaction type has no driver, on either store.
	other := func(context.Context, *pgconn.PgConn) (Receipt, error) { return Receipt{}, nil }
	for _, st := range []*idem.Store{e.store, sqlStore} {
		_, err = idem.Atomic(keyed("a"), st, e.m, fp("1"), other)
		require.ErrorContains(t, err, "idem: Atomic: the body takes a *pgconn.PgConn: a method's transaction is a pgx.Tx or a *sql.Tx")
		_, err = idem.AtomicInTx(keyed("a"), st, &pgconn.PgConn{}, e.m, fp("1"), other)
		require.ErrorContains(t, err, "idem: AtomicInTx: the body takes a *pgconn.PgConn")
		lookup := func(context.Context, *pgconn.PgConn, idem.InlineKey) (Order, []byte, error) { return Order{}, nil, nil }
		otherOrder := func(context.Context, *pgconn.PgConn) (Order, error) { return Order{}, nil }
		_, err = idem.Inline(keyed("a"), st, om, fp("1"), lookup, otherOrder)
		require.ErrorContains(t, err, "idem: Inline: the body takes a *pgconn.PgConn")
		_, err = idem.InlineInTx(keyed("a"), st, &pgconn.PgConn{}, om, fp("1"), lookup, otherOrder)
		require.ErrorContains(t, err, "idem: InlineInTx: the body takes a *pgconn.PgConn")
	}
	assert.Equal(t, int64(0), e.executed.Load(), "no body ran")
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
}

// TestSQLBodyThatEndsItsTransaction: database/sql cannot stop a body from
// committing the *sql.Tx it is given; Atomic then refuses to report
// success, and does not retry.
func TestSQLBodyThatEndsItsTransaction(t *testing.T) {
	e := newEnvOn(t, sqlPath)
	_, err := idem.Atomic(keyed("c"), e.store, e.m, fp("100"), func(ctx context.Context, tx *sql.Tx) (Receipt, error) {
		return Receipt{}, tx.Rollback()
	})
	require.ErrorContains(t, err, "must not commit or roll back")
	assert.Equal(t, int64(1), e.executed.Load(), "not retried")
	assert.Equal(t, 0, e.count(t, "idempotency_keys"))
}

// TestDeprecatedSQLNamesForward: code generated before the entry points
// took a *sql.Tx body calls AtomicSQL, AtomicSQLInTx, InlineSQL and
// InlineSQLInTx; they run the same protocol as Atomic and Inline.
func TestDeprecatedSQLNamesForward(t *testing.T) {
	e := newEnvOn(t, sqlPath)
	ctx := context.Background()
	charge := func(ctx context.Context, tx *sql.Tx) (Receipt, error) { return chargeOn(1)(ctx, sqlStmts{tx}) }
	first, err := idem.AtomicSQL(keyed("a"), e.store, e.m, fp("1"), charge)
	require.NoError(t, err)
	again, err := idem.AtomicSQL(idem.ContextWithRetry(keyed("a")), e.store, e.m, fp("1"), charge)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, int64(1), e.executed.Load(), "replayed, not run again (a marked retry looks the key up first)")
	tx, err := e.db.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = idem.AtomicSQLInTx(idem.ContextWithRetry(keyed("a")), e.store, tx, e.m, fp("1"), charge)
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.executed.Load(), "replayed in the caller's transaction (a marked retry looks the key up first)")
	require.NoError(t, tx.Commit())

	ie := newInlineEnvOn(t, sqlPath)
	order := func(ctx context.Context, tx *sql.Tx) (Order, error) { return createOrderOn("x", 1)(ctx, sqlStmts{tx}) }
	o1, err := idem.InlineSQL(keyed("c"), ie.store, ie.om, fp("3"), sqlOrderByKey, order)
	require.NoError(t, err)
	itx, err := ie.db.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = itx.Rollback() }()
	o2, err := idem.InlineSQLInTx(keyed("c"), ie.store, itx, ie.om, fp("3"), sqlOrderByKey, order)
	require.NoError(t, err)
	assert.Equal(t, o1, o2, "replayed from the row")
	assert.Equal(t, int64(1), ie.replayed.Load())
	require.NoError(t, itx.Commit())
}
