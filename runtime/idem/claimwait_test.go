package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// holder is an atomic call in a caller's transaction that the test keeps
// open: the key's row is recorded and not committed, as when the caller is
// slow, stuck, or cut off from the database mid-transaction.
type holder struct {
	recorded chan struct{} // closed when AtomicInTx has returned
	release  chan struct{} // closing it lets the caller commit
	done     chan result
}

func (e *env) hold(ctx context.Context, req string, amount int64) *holder {
	h := &holder{recorded: make(chan struct{}), release: make(chan struct{}), done: make(chan result, 1)}
	go func() {
		tx, err := e.db.Pool.Begin(context.Background())
		var r Receipt
		if err == nil {
			r, err = idem.AtomicInTx(ctx, e.store, tx, e.m, fp(req), charge(amount))
		}
		close(h.recorded)
		<-h.release
		if err == nil {
			err = tx.Commit(context.Background())
		} else if tx != nil {
			_ = tx.Rollback(context.Background())
		}
		h.done <- result{r, err, false}
	}()
	<-h.recorded
	return h
}

// A twin blocked on the key's row, recorded by an attempt that does not
// commit, gives up after
// the claim wait with ErrInProgress (409 over HTTP), freeing its connection,
// instead of waiting for as long as its context allows; once the holder
// commits, the twin's retry replays its answer.
func TestClaimWaitEndsInProgress(t *testing.T) {
	e := newEnv(t, idem.WithClaimWait(50*time.Millisecond))
	h := e.hold(keyed("held"), "100", 100)

	// The twin's own deadline is far away: only the claim wait can end its
	// wait before the holder is released.
	ctx, cancel := context.WithTimeout(keyed("held"), time.Minute)
	defer cancel()
	twin := e.call(ctx, "100", 100)
	var ip *idem.InProgressError
	require.ErrorAs(t, twin.err, &ip, "a twin blocked behind a holder that does not commit")
	assert.ErrorIs(t, twin.err, idem.ErrInProgress)
	assert.GreaterOrEqual(t, ip.RetryAfter, time.Second)
	assert.Equal(t, "held", ip.Key)
	assert.EqualValues(t, 1, e.inProgress.Load(), "the InProgress hook saw the twin")
	assert.EqualValues(t, 2, e.claimed.Load(), "the twin ran its body too")

	close(h.release)
	first := <-h.done
	require.NoError(t, first.err)
	again := e.call(keyed("held"), "100", 100)
	require.NoError(t, again.err)
	assert.True(t, again.replayed)
	assert.Equal(t, first.r, again.r)
	assert.Equal(t, 1, e.count(t, "payments"), "the twin's work rolled back")
}

// The same inside a caller's transaction: the twin's refused claim rolls back
// to its savepoint and leaves the caller's transaction usable.
func TestClaimWaitEndsInProgressInTx(t *testing.T) {
	e := newEnv(t, idem.WithClaimWait(50*time.Millisecond))
	h := e.hold(keyed("held-tx"), "100", 100)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `INSERT INTO payments (amount) VALUES (7)`)
	require.NoError(t, err)
	_, err = idem.AtomicInTx(idem.ContextWithKey(ctx, "held-tx"), e.store, tx, e.m, fp("100"), charge(100))
	var ip *idem.InProgressError
	require.ErrorAs(t, err, &ip)
	_, err = tx.Exec(ctx, `INSERT INTO payments (amount) VALUES (8)`)
	require.NoError(t, err, "the caller's transaction is still usable")
	require.NoError(t, tx.Commit(ctx))

	close(h.release)
	require.NoError(t, (<-h.done).err)
	assert.Equal(t, 3, e.count(t, "payments")) // 7, 8 and the holder's: the twin's rolled back
}

// The claim wait bounds the claim only: the body, and the caller's
// transaction after AtomicInTx, wait on locks as the connection is
// configured.
func TestClaimWaitLeavesTheBodysLockTimeout(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL), idemtest.WithPoolConfig(func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["lock_timeout"] = "7s"
	}))
	s, err := idem.NewStore(db.Pool, idem.WithClaimWait(50*time.Millisecond))
	require.NoError(t, err)
	m := chargeMethod()
	show := func(ctx context.Context, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var v string
		require.NoError(t, q.QueryRow(ctx, "SHOW lock_timeout").Scan(&v))
		return v
	}
	ctx := context.Background()
	var inBody string
	_, err = idem.Atomic(keyed("lt"), s, m, fp("1"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		inBody = show(ctx, tx)
		return charge(1)(ctx, tx)
	})
	require.NoError(t, err)
	assert.Equal(t, "7s", inBody, "Atomic's body")

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL lock_timeout = '3s'")
	require.NoError(t, err)
	_, err = idem.AtomicInTx(keyed("lt-tx"), s, tx, m, fp("1"), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		inBody = show(ctx, tx)
		return charge(1)(ctx, tx)
	})
	require.NoError(t, err)
	assert.Equal(t, "3s", inBody, "AtomicInTx's body")
	assert.Equal(t, "3s", show(ctx, tx), "the caller's transaction after AtomicInTx")
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, "7s", show(ctx, db.Pool), "the connection after the transaction")
}
