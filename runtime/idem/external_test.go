package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// bank stands for a third party reached over HTTP. It counts calls and the
// distinct Idempotency-Key values it saw, and can hold requests until let go.
type bank struct {
	srv   *httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	keys  map[string]int
	hold  chan struct{} // when non-nil, each call waits for a receive
}

func newBank(t *testing.T) *bank {
	b := &bank{keys: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		b.mu.Lock()
		b.keys[r.Header.Get("Idempotency-Key")]++
		hold := b.hold
		b.mu.Unlock()
		if hold != nil {
			<-hold
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *bank) pay(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (b *bank) distinctKeys() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys)
}

// Payout is the response of the external test method.
type Payout struct {
	Ref    string
	Amount int64
}

const lockTimeout = 30 * time.Second

func payoutMethod() *idem.Method[Payout] {
	return &idem.Method[Payout]{
		Name: "Test.Payout", Retention: time.Hour, LockTimeout: lockTimeout,
		FinalErrors: []idem.FinalError{{Name: "errDeclined", Err: errDeclined}},
	}
}

func payFp(amount string) []byte {
	f := idem.NewFingerprinter("Test.Payout")
	f.Field("amount")
	f.String(amount)
	return f.Sum()
}

// payout calls the bank once, with a downstream key, as a recorded step.
func (b *bank) payout(ctx context.Context) (Payout, error) {
	ref, err := idem.Step(ctx, "transfer", func(ctx context.Context) (string, error) {
		k := idem.DownstreamKey(ctx, "transfer")
		return k, b.pay(ctx, k)
	})
	return Payout{Ref: ref, Amount: 100}, err
}

func TestExternalTwinDuringSlowCallIsRefused(t *testing.T) {
	e := newEnv(t)
	b := newBank(t)
	b.hold = make(chan struct{})
	m := payoutMethod()

	first := make(chan error, 1)
	var out Payout
	go func() {
		var err error
		out, err = idem.External(keyed("p"), e.store, m, payFp("100"), b.payout)
		first <- err
	}()
	require.Eventually(t, func() bool { return b.calls.Load() == 1 }, 10*time.Second, time.Millisecond)

	_, err := idem.External(keyed("p"), e.store, m, payFp("100"), b.payout)
	var ip *idem.InProgressError
	require.ErrorAs(t, err, &ip)
	require.ErrorIs(t, err, idem.ErrInProgress)
	assert.Greater(t, ip.RetryAfter, time.Duration(0))
	assert.LessOrEqual(t, ip.RetryAfter, lockTimeout)

	close(b.hold)
	require.NoError(t, <-first)
	ctx, o := idem.ContextWithOutcome(keyed("p"))
	again, err := idem.External(ctx, e.store, m, payFp("100"), b.payout)
	require.NoError(t, err)
	assert.True(t, o.Replayed())
	assert.Equal(t, out, again)
	assert.Equal(t, int64(1), b.calls.Load(), "the bank is called once")
	assert.Equal(t, int64(1), e.executed.Load())
}

func TestExternalWaitReturnsFirstResult(t *testing.T) {
	e := newEnv(t)
	b := newBank(t)
	b.hold = make(chan struct{})
	m := payoutMethod()
	first := make(chan Payout, 1)
	go func() {
		out, err := idem.External(keyed("w"), e.store, m, payFp("100"), b.payout)
		assert.NoError(t, err)
		first <- out
	}()
	require.Eventually(t, func() bool { return b.calls.Load() == 1 }, 10*time.Second, time.Millisecond)
	go func() { time.Sleep(100 * time.Millisecond); close(b.hold) }()
	ctx, cancel := context.WithTimeout(idem.ContextWithWait(keyed("w")), 20*time.Second)
	defer cancel()
	got, err := idem.External(ctx, e.store, m, payFp("100"), b.payout)
	require.NoError(t, err)
	assert.Equal(t, <-first, got)
	assert.Equal(t, int64(1), b.calls.Load())
}

func TestExternalWaitBoundedByContext(t *testing.T) {
	e := newEnv(t)
	b := newBank(t)
	b.hold = make(chan struct{})
	defer close(b.hold)
	m := payoutMethod()
	go func() { _, _ = idem.External(keyed("w"), e.store, m, payFp("100"), b.payout) }()
	require.Eventually(t, func() bool { return b.calls.Load() == 1 }, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(idem.ContextWithWait(keyed("w")), 200*time.Millisecond)
	defer cancel()
	_, err := idem.External(ctx, e.store, m, payFp("100"), b.payout)
	require.ErrorIs(t, err, idem.ErrInProgress)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestExternalCrashThenTakeover(t *testing.T) {
	e := newEnv(t)
	b := newBank(t)
	m := payoutMethod()
	// The first attempt pays, then dies before it can finalise (its caller
	// went away). Its step was recorded.
	ctx, cancel := context.WithCancel(keyed("c"))
	_, err := idem.External(ctx, e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
		_, err := b.payout(ctx)
		require.NoError(t, err)
		cancel()
		return Payout{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)

	_, err = idem.External(keyed("c"), e.store, m, payFp("100"), b.payout)
	require.ErrorIs(t, err, idem.ErrInProgress, "the key stays in progress until the lock expires")

	e.clock.Advance(lockTimeout)
	out, err := idem.External(keyed("c"), e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
		// Not a step this time: the bank is called again, with the same key.
		k := idem.DownstreamKey(ctx, "transfer")
		return Payout{Ref: k, Amount: 100}, b.pay(ctx, k)
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.takenOver.Load())
	assert.Equal(t, int64(2), b.calls.Load())
	assert.Equal(t, 1, b.distinctKeys(), "the downstream key is the same across attempts")
	assert.Equal(t, idem.DownstreamKey(idem.ContextWithKey(context.Background(), "c"), "transfer")[:5], out.Ref[:5])
}

func TestExternalCompletedStepsNotRerun(t *testing.T) {
	e := newEnv(t)
	b := newBank(t)
	m := payoutMethod()
	var receipts atomic.Int64
	work := func(crash bool) func(context.Context) (Payout, error) {
		return func(ctx context.Context) (Payout, error) {
			p, err := b.payout(ctx) // step "transfer"
			if err != nil {
				return p, err
			}
			if crash {
				panic("process died after the transfer")
			}
			_, err = idem.Step(ctx, "receipt", func(context.Context) (bool, error) { receipts.Add(1); return true, nil })
			return p, err
		}
	}
	require.Panics(t, func() { _, _ = idem.External(keyed("s"), e.store, m, payFp("100"), work(true)) })
	e.clock.Advance(lockTimeout)
	out, err := idem.External(keyed("s"), e.store, m, payFp("100"), work(false))
	require.NoError(t, err)
	assert.Equal(t, int64(1), b.calls.Load(), "the recorded transfer is not repeated")
	assert.Equal(t, int64(1), receipts.Load())
	assert.Equal(t, idem.DownstreamKey(idem.ContextWithKey(context.Background(), "s"), "transfer"), idem.DownstreamKey(keyed("s"), "transfer"))
	assert.NotEmpty(t, out.Ref)
}

func TestExternalZombieFinaliseRejected(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	release := make(chan struct{})
	zombie := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := idem.External(keyed("z"), e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
			close(started)
			<-release
			return Payout{Ref: "zombie"}, nil
		})
		zombie <- err
	}()
	<-started
	e.clock.Advance(lockTimeout + time.Second)
	winner, err := idem.External(keyed("z"), e.store, m, payFp("100"), func(context.Context) (Payout, error) {
		return Payout{Ref: "winner"}, nil
	})
	require.NoError(t, err)
	close(release)
	err = <-zombie
	require.ErrorIs(t, err, idem.ErrLockLost)
	assert.Equal(t, int64(1), e.lockLost.Load())
	got, err := idem.External(keyed("z"), e.store, m, payFp("100"), func(context.Context) (Payout, error) {
		t.Fatal("must replay")
		return Payout{}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, winner, got, "the zombie never overwrites the winner's result")
	assert.Equal(t, "winner", got.Ref)
}

func TestExternalTransientErrorReleases(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	transient := errors.New("bank: 503")
	_, err := idem.External(keyed("t"), e.store, m, payFp("100"), func(context.Context) (Payout, error) {
		return Payout{}, transient
	})
	require.ErrorIs(t, err, transient)
	out, err := idem.External(keyed("t"), e.store, m, payFp("100"), func(context.Context) (Payout, error) {
		return Payout{Ref: "ok"}, nil
	})
	require.NoError(t, err, "the retry runs at once")
	assert.Equal(t, "ok", out.Ref)
	// A different request with the released key is still a mismatch.
	_, err = idem.External(keyed("t"), e.store, m, payFp("999"), func(context.Context) (Payout, error) { return Payout{}, nil })
	require.ErrorIs(t, err, idem.ErrMismatch)
}

func TestExternalFinalErrorReplayed(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	body := func(context.Context) (Payout, error) { return Payout{}, errDeclined }
	_, err := idem.External(keyed("f"), e.store, m, payFp("100"), body)
	require.ErrorIs(t, err, errDeclined)
	_, err = idem.External(keyed("f"), e.store, m, payFp("100"), body)
	require.ErrorIs(t, err, errDeclined)
	assert.Equal(t, int64(1), e.executed.Load())
	assert.Equal(t, int64(1), e.replayed.Load())
}

func TestExternalHeartbeatKeepsLock(t *testing.T) {
	e := newEnv(t, idem.WithHeartbeat(5*time.Millisecond))
	m := payoutMethod()
	release := make(chan struct{})
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := idem.External(keyed("h"), e.store, m, payFp("100"), func(ctx context.Context) (Payout, error) {
			close(started)
			<-release
			return Payout{Ref: "long"}, nil
		})
		done <- err
	}()
	<-started
	lockedUntil := func() time.Time {
		var t0 time.Time
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT locked_until FROM idempotency_keys`).Scan(&t0))
		return t0
	}
	before := lockedUntil()
	e.clock.Advance(lockTimeout / 2)
	require.Eventually(t, func() bool { return lockedUntil().After(before) }, 10*time.Second, 5*time.Millisecond)
	e.clock.Advance(lockTimeout / 2)
	_, err := idem.External(keyed("h"), e.store, m, payFp("100"), func(context.Context) (Payout, error) { return Payout{}, nil })
	require.ErrorIs(t, err, idem.ErrInProgress, "the heartbeat kept the lock past its original expiry")
	close(release)
	require.NoError(t, <-done)
}

// TestInProgressRetryAfterFollowsRecentDurations: once the method has run,
// a twin is told to come back after its typical duration (here the one body
// that ran, read from the Executed hook), not after the whole 30s lock; the
// store's clock is frozen, so the lock's time left is exactly the timeout.
func TestInProgressRetryAfterFollowsRecentDurations(t *testing.T) {
	var ran atomic.Int64 // the first body's duration
	e := newEnv(t, idem.WithHooks(idem.Hooks{Executed: func(_ context.Context, ev idem.Event) {
		ran.CompareAndSwap(0, int64(ev.Duration))
	}}))
	b := newBank(t)
	m := payoutMethod()
	_, err := idem.External(keyed("before"), e.store, m, payFp("100"), b.payout)
	require.NoError(t, err)
	require.NotZero(t, ran.Load())

	b.mu.Lock()
	b.hold = make(chan struct{})
	b.mu.Unlock()
	first := make(chan error, 1)
	go func() {
		_, err := idem.External(keyed("p"), e.store, m, payFp("100"), b.payout)
		first <- err
	}()
	require.Eventually(t, func() bool { return b.calls.Load() == 2 }, 10*time.Second, time.Millisecond)
	_, err = idem.External(keyed("p"), e.store, m, payFp("100"), b.payout)
	var ip *idem.InProgressError
	require.ErrorAs(t, err, &ip)
	want := max(min(time.Duration(ran.Load()), lockTimeout), time.Second)
	assert.Equal(t, want, ip.RetryAfter, "the typical duration, capped by the lock, at least 1s")
	close(b.hold)
	require.NoError(t, <-first)
}
