package idem_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// blocked starts an external call whose body waits for release, and returns
// once the body runs; the call's result arrives on done.
func blocked(t *testing.T, ctx context.Context, s *idem.Store, m *idem.Method[Payout], ref string) (release chan struct{}, done chan error) {
	t.Helper()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := idem.External(ctx, s, m, payFp("100"), func(context.Context) (Payout, error) {
			close(started)
			<-release
			return Payout{Ref: ref}, nil
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the body did not run: %v", err)
	}
	return release, done
}

func mustNotRun(t *testing.T) func(context.Context) (Payout, error) {
	return func(context.Context) (Payout, error) {
		t.Error("the body must not run while another attempt holds a live lock")
		return Payout{}, nil
	}
}

// A takeover late in the retention window holds a lock that outlives the
// window: the row's retention moves out with the lock, so the live call is
// never reclaimed as a new request.
func TestLiveLockOutlivesRetentionIsNotReclaimed(t *testing.T) {
	e := newEnv(t)
	m := &idem.Method[Payout]{Name: "Test.Payout", Retention: 2 * time.Minute, LockTimeout: time.Minute}

	// The first attempt dies mid-work: the key stays locked until its lock ends.
	ctx, cancel := context.WithCancel(keyed("k"))
	_, err := idem.External(ctx, e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
		cancel()
		return Payout{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)

	// A retry takes over late in the retention window and runs long.
	e.clock.Advance(90 * time.Second)
	release, done := blocked(t, keyed("k"), e.store, m, "second")
	assert.Equal(t, int64(1), e.takenOver.Load())

	// Past the original window, with the second attempt's lock still live.
	e.clock.Advance(45 * time.Second)
	_, err = idem.External(keyed("k"), e.store, m, payFp("100"), mustNotRun(t))
	require.ErrorIs(t, err, idem.ErrInProgress)
	n, err := e.store.Sweep(context.Background(), 10)
	require.NoError(t, err)
	assert.Zero(t, n, "a row with a live lock is not swept")

	close(release)
	require.NoError(t, <-done)
}

// Sweep never deletes a row whose lock is live, even one whose expires_at has
// passed (a row written before retention moved with the lock).
func TestSweepSparesLiveLocks(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	release, done := blocked(t, keyed("live"), e.store, m, "live")
	_, err := e.db.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = created_at`)
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	n, err := e.store.Sweep(context.Background(), 10)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = idem.External(keyed("live"), e.store, m, payFp("100"), mustNotRun(t))
	require.ErrorIs(t, err, idem.ErrInProgress, "nor is it reclaimed by a claim")
	close(release)
	require.NoError(t, <-done)
}

// The heartbeat pushes the retention window out with the lock.
func TestHeartbeatExtendsRetention(t *testing.T) {
	e := newEnv(t, idem.WithHeartbeat(5*time.Millisecond))
	m := &idem.Method[Payout]{Name: "Test.Payout", Retention: time.Minute, LockTimeout: time.Minute}
	release, done := blocked(t, keyed("h"), e.store, m, "long")
	var expires0 time.Time
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT expires_at FROM idempotency_keys`).Scan(&expires0))
	e.clock.Advance(50 * time.Second)
	require.Eventually(t, func() bool {
		var expires, locked time.Time
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT expires_at, locked_until FROM idempotency_keys`).Scan(&expires, &locked))
		return locked.After(expires0) && !expires.Before(locked)
	}, 10*time.Second, 5*time.Millisecond)
	e.clock.Advance(20 * time.Second) // past the first window, inside the extended lock
	_, err := idem.External(keyed("h"), e.store, m, payFp("100"), mustNotRun(t))
	require.ErrorIs(t, err, idem.ErrInProgress)
	close(release)
	require.NoError(t, <-done)
}

// A stale attempt whose row was swept and claimed again cannot finalise:
// the fencing token of the new claim differs even though its fence counter
// started again.
func TestStaleAttemptAfterSweepCannotFinalise(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	releaseA, doneA := blocked(t, keyed("z"), e.store, m, "stale")
	e.clock.Advance(m.Retention + time.Second)
	n, err := e.store.Sweep(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	releaseB, doneB := blocked(t, keyed("z"), e.store, m, "fresh")
	close(releaseA)
	require.ErrorIs(t, <-doneA, idem.ErrLockLost, "the stale attempt's finish does not match the new claim")
	close(releaseB)
	require.NoError(t, <-doneB)
	got, err := idem.External(keyed("z"), e.store, m, payFp("100"), mustNotRun(t))
	require.NoError(t, err)
	assert.Equal(t, "fresh", got.Ref)
}

// The downstream key is the same for every attempt at one intention and new
// for the same key reused after its retention window.
func TestDownstreamKeyFollowsTheIntention(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	var keys []string
	body := func(ctx context.Context) (Payout, error) {
		keys = append(keys, idem.DownstreamKey(ctx, "transfer"))
		return Payout{Ref: "ok"}, nil
	}
	ctx, cancel := context.WithCancel(keyed("d"))
	_, err := idem.External(ctx, e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
		keys = append(keys, idem.DownstreamKey(ctx, "transfer"))
		cancel()
		return Payout{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	e.clock.Advance(lockTimeout)
	_, err = idem.External(keyed("d"), e.store, m, payFp("100"), body) // takeover
	require.NoError(t, err)
	e.clock.Advance(m.Retention)
	_, err = idem.External(keyed("d"), e.store, m, payFp("100"), body) // a new intention
	require.NoError(t, err)
	require.Len(t, keys, 3)
	assert.Equal(t, keys[0], keys[1], "a takeover sends the same downstream key")
	assert.NotEqual(t, keys[1], keys[2], "a new intention under the same key sends a new one")
}

func TestNewStoreRefusesUnsafeSettings(t *testing.T) {
	db := idemtest.New(t)
	for name, opts := range map[string][]idem.Option{
		"retention under a minute":       {idem.WithRetention(30 * time.Second), idem.WithLockTimeout(time.Second)},
		"retention shorter than lock":    {idem.WithRetention(time.Minute), idem.WithLockTimeout(10 * time.Minute)},
		"zero backoff":                   {idem.WithBackoff(0)},
		"negative backoff":               {idem.WithBackoff(-time.Second)},
		"no attempts":                    {idem.WithMaxAttempts(0)},
		"heartbeat not under lock":       {idem.WithHeartbeat(time.Minute)},
		"negative heartbeat":             {idem.WithHeartbeat(-time.Second)},
		"non-positive lock":              {idem.WithLockTimeout(0)},
		"claim wait under 1ms":           {idem.WithClaimWait(time.Microsecond)},
		"claim wait over 24h":            {idem.WithClaimWait(25 * time.Hour)},
		"sweep share 0":                  {idem.WithSweepShare(0)},
		"sweep share over 1":             {idem.WithSweepShare(1.5)},
		"sweep share NaN":                {idem.WithSweepShare(math.NaN())},
		"table too long for index names": {idem.WithTable("t23456789012345678901234567890123456789012345678_")},
	} {
		_, err := idem.NewStore(db.Pool, opts...)
		assert.Error(t, err, name)
	}
	_, err := idem.NewStore(db.Pool, idem.WithRetention(time.Minute), idem.WithLockTimeout(time.Minute))
	require.NoError(t, err)
	_, err = idem.NewStore(db.Pool, idem.WithSweepShare(1))
	require.NoError(t, err, "a share of 1 sweeps without pausing")
}

func TestMethodSettingsCheckedAtCallTime(t *testing.T) {
	e := newEnv(t)
	ran := false
	bad := &idem.Method[Payout]{Name: "Test.Payout", Retention: 2 * time.Minute, LockTimeout: 10 * time.Minute}
	_, err := idem.External(keyed("m"), e.store, bad, payFp("100"), func(context.Context) (Payout, error) { ran = true; return Payout{}, nil })
	require.ErrorContains(t, err, "shorter than the lock timeout")
	short := &idem.Method[Receipt]{Name: "Test.Charge", Retention: time.Second}
	_, err = idem.Atomic(keyed("m"), e.store, short, fp("1"), charge(1))
	require.ErrorContains(t, err, "under the minimum")
	assert.False(t, ran)
	assert.Zero(t, e.count(t, "idempotency_keys"))
}

// A scope the ledger cannot hold is refused as such, before any database
// call, not reported as the ledger being unavailable.
func TestBadScopeIsRefusedNotAStoreFailure(t *testing.T) {
	e := newEnv(t)
	for _, scope := range []string{"acct\x00", "acct\xff", strings.Repeat("s", 3000)} {
		ctx := idem.ContextWithScope(keyed("k"), scope)
		_, err := idem.Atomic(ctx, e.store, e.m, fp("1"), charge(1))
		require.ErrorIs(t, err, idem.ErrInvalidScope)
		assert.NotErrorIs(t, err, idem.ErrStore)
		_, err = idem.External(ctx, e.store, payoutMethod(), payFp("1"), mustNotRun(t))
		require.ErrorIs(t, err, idem.ErrInvalidScope)
	}
	assert.Zero(t, e.executed.Load())
}
