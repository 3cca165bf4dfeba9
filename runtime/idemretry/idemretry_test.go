package idemretry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idemretry"
)

func TestBackoff(t *testing.T) {
	p := idemretry.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 100 {
			d := p.Backoff(attempt)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
	huge := idemretry.Policy{BaseDelay: time.Hour, MaxDelay: math.MaxInt64}
	for _, attempt := range []int{1, 40, 64, 1000} {
		assert.Positive(t, huge.Backoff(attempt), "the doubling never overflows (attempt %d)", attempt)
	}
	var zero idemretry.Policy
	d := zero.Backoff(1)
	assert.GreaterOrEqual(t, d, idemretry.DefaultBaseDelay/2)
	assert.LessOrEqual(t, d, idemretry.DefaultBaseDelay)
}

func TestNext(t *testing.T) {
	p := idemretry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxWait: time.Minute}
	ctx := context.Background()

	d, ok := p.Next(ctx, 1, 0, false)
	assert.True(t, ok)
	assert.LessOrEqual(t, d, time.Millisecond)
	_, ok = p.Next(ctx, 3, 0, false)
	assert.False(t, ok, "the third attempt of three was the last")

	d, ok = p.Next(ctx, 1, 7*time.Second, true)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, d, "the server's delay when longer than the backoff")
	_, ok = p.Next(ctx, 1, 2*time.Minute, true)
	assert.False(t, ok, "a delay past MaxWait ends the retries")

	deadline, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	_, ok = p.Next(deadline, 1, 59*time.Second, true)
	assert.True(t, ok)
	long := p
	long.MaxWait = 3 * time.Hour
	_, ok = long.Next(deadline, 1, 2*time.Hour, true)
	assert.False(t, ok, "a wait that ends after the deadline is not made")

	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, ok = p.Next(cancelled, 1, 0, false)
	assert.False(t, ok, "an ended context ends the retries")

	var zero idemretry.Policy
	for attempt := 1; attempt < idemretry.DefaultMaxAttempts; attempt++ {
		_, ok = zero.Next(ctx, attempt, 0, false)
		assert.True(t, ok, "attempt %d of the default %d", attempt, idemretry.DefaultMaxAttempts)
	}
	_, ok = zero.Next(ctx, idemretry.DefaultMaxAttempts, 0, false)
	assert.False(t, ok)
}

func TestSleep(t *testing.T) {
	assert.NoError(t, idemretry.Sleep(context.Background(), 0))
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := context.DeadlineExceeded
	cancel(cause)
	assert.ErrorIs(t, idemretry.Sleep(ctx, time.Hour), cause, "the context's cause, at once")
}

func TestDo(t *testing.T) {
	p := idemretry.Policy{MaxAttempts: 4, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}
	failure := errors.New("connection reset")
	answer := errors.New("card declined")
	retryFailures := func(err error) idemretry.Verdict { return idemretry.Verdict{Retry: errors.Is(err, failure)} }

	var calls, retried []int
	err := p.Do(context.Background(), func(n int) error {
		calls = append(calls, n)
		if n < 3 {
			return failure
		}
		return nil
	}, retryFailures, func(n int, err error) { retried = append(retried, n); assert.ErrorIs(t, err, failure) })
	assert.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, calls)
	assert.Equal(t, []int{1, 2}, retried)

	calls = nil
	err = p.Do(context.Background(), func(n int) error { calls = append(calls, n); return answer }, retryFailures, nil)
	assert.Same(t, answer, err, "an answer is returned as it is, at once")
	assert.Equal(t, []int{1}, calls)

	calls = nil
	err = p.Do(context.Background(), func(n int) error { calls = append(calls, n); return failure }, retryFailures, nil)
	assert.Same(t, failure, err, "the last attempt's error, unwrapped")
	assert.Equal(t, []int{1, 2, 3, 4}, calls, "MaxAttempts, not one more")

	// The wait is an hour, so only the cancelled context ends it: with p's
	// microsecond the timer could fire first and the loop go on.
	patient := idemretry.Policy{MaxAttempts: 4, BaseDelay: time.Hour, MaxDelay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	err = patient.Do(ctx, func(int) error { return failure }, retryFailures, func(int, error) { cancel() })
	var gaveUp *idemretry.GaveUpError
	assert.ErrorAs(t, err, &gaveUp)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, failure)
	assert.Equal(t, "gave up after 1 attempts: context canceled (last attempt: connection reset)", err.Error())
}
