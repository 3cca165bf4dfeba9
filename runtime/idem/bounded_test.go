package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// hangGuard is how long a test waits for a call that must return while the
// database cannot answer it. It only turns a hang into a failure; the tests
// assert that the call returned, never how fast.
const hangGuard = time.Minute

// lockRow holds the ledger row of key locked (SELECT ... FOR UPDATE in an
// open transaction) until release is called: every write to it waits.
func (e *env) lockRow(t *testing.T, key string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM idempotency_keys WHERE key = $1 FOR UPDATE) AS locked`, key).Scan(&n))
	require.Equal(t, 1, n, "the row of key %s", key)
	return func() { require.NoError(t, tx.Rollback(ctx)) }
}

// waitBlocked waits until a statement of the test's database whose text is
// like pattern waits on a lock.
func (e *env) waitBlocked(t *testing.T, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for {
		var n int
		require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, pattern).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no statement like %q waited on a lock within %s", pattern, hangGuard)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// A step whose result cannot be written (another transaction holds the
// ledger row) gives up after the finalise timeout: the call returns, while
// the row is still locked, with ErrOutcomeNotRecorded, and the key is not
// released. The write used to run detached from the caller's context with no
// bound, and waited for as long as the row was locked.
func TestStepWriteIsBounded(t *testing.T) {
	e := newEnv(t, idem.WithFinaliseTimeout(50*time.Millisecond))
	m := payoutMethod()
	inBody, locked := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.External(keyed("step"), e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
			close(inBody)
			<-locked
			ref, err := idem.Step(ctx, "transfer", func(context.Context) (string, error) { return "tr-1", nil })
			return Payout{Ref: ref}, err
		})
		done <- err
	}()
	<-inBody
	release := e.lockRow(t, "step")
	close(locked)
	var err error
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		t.Fatal("the call did not return while its ledger row was locked")
	}
	release()
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded)
	_, err = idem.External(keyed("step"), e.store, m, payFp("100"), func(context.Context) (Payout, error) {
		t.Error("the step ran again")
		return Payout{}, nil
	})
	// The writes that timed out on the client may still land on the server
	// once the row is free (the server ends a statement whose client has
	// gone only when it next talks to it): the key is still locked, or
	// replays the unrecorded outcome. Either way it was never released.
	assert.True(t, errors.Is(err, idem.ErrInProgress) || errors.Is(err, idem.ErrOutcomeNotRecorded),
		"the key is never released after a step ran: got %v", err)
}

// The heartbeat's stop cancels an extension that waits on the ledger row, so
// a body that returns while its row is locked is not held by its heartbeat.
// The extension used to run with the body's context, which outlives the stop,
// and no bound.
func TestHeartbeatStopCancelsABlockedExtension(t *testing.T) {
	executed := make(chan struct{})
	e := newEnv(t, idem.WithHeartbeat(200*time.Millisecond), idem.WithHooks(idem.Hooks{
		Executed: func(context.Context, idem.Event) { close(executed) },
	}))
	m := payoutMethod()
	inBody, blocked := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.External(keyed("hb"), e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
			close(inBody)
			<-blocked
			return Payout{Ref: "done"}, nil
		})
		done <- err
	}()
	<-inBody
	release := e.lockRow(t, "hb")
	e.waitBlocked(t, "UPDATE%locked_until%") // an extension waits on the row
	close(blocked)
	select {
	case <-executed: // the body returned and the heartbeat stopped
	case <-time.After(hangGuard):
		t.Fatal("the heartbeat's stop waited for an extension blocked on the ledger row")
	}
	release()
	require.NoError(t, <-done)
	var status string
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT status FROM idempotency_keys WHERE key = 'hb'`).Scan(&status))
	assert.Equal(t, idem.StatusDone, status)
}
