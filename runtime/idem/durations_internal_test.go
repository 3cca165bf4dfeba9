package idem

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The typical duration is the 90th percentile of the last 16 bodies of
// that method; older ones and other methods do not count.
func TestRecentDurationsTypical(t *testing.T) {
	var r recentDurations
	_, ok := r.typical("M")
	assert.False(t, ok, "nothing known yet")
	for i := range 100 { // long ago, pushed out of the ring
		r.observe("M", time.Hour+time.Duration(i))
	}
	for i := 1; i <= 16; i++ { // 1s .. 16s
		r.observe("M", time.Duration(i)*time.Second)
	}
	r.observe("Other", time.Minute)
	d, ok := r.typical("M")
	require.True(t, ok)
	assert.Equal(t, 15*time.Second, d, "ceil(0.9*16) = 15th of 16, sorted")

	var one recentDurations
	one.observe("M", 2*time.Second)
	d, _ = one.typical("M")
	assert.Equal(t, 2*time.Second, d)
}

// RetryAfter: the typical duration, capped by the time left on the lock, at
// least 1s; the lock alone when no duration is known.
func TestRecentDurationsRetryAfter(t *testing.T) {
	var r recentDurations
	assert.Equal(t, 30*time.Second, r.retryAfter("M", 30*time.Second), "unknown: the lock")
	assert.Equal(t, time.Second, r.retryAfter("M", 0), "at least 1s")
	r.observe("M", 2*time.Second)
	assert.Equal(t, 2*time.Second, r.retryAfter("M", 30*time.Second), "a 2s call under a 30s lock")
	assert.Equal(t, 500*time.Millisecond+time.Second, r.retryAfter("M", 1500*time.Millisecond), "capped by the lock")
	r.observe("Fast", time.Millisecond)
	assert.Equal(t, time.Second, r.retryAfter("Fast", 30*time.Second), "at least 1s")
}

// An in-progress row is answered with the estimate: durations injected, no
// clock involved.
func TestInProgressAdvertisesRecentDurations(t *testing.T) {
	s := &Store{cfg: config{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, recent: &recentDurations{}}
	c := call{scope: "s", method: "Payments.Payout", key: "k", fp: []byte{1}}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	locked := now.Add(30 * time.Second)
	row := ledgerRow{fingerprint: []byte{1}, status: StatusInProgress, lockedUntil: &locked, now: now}
	retry := func() time.Duration {
		_, err := settle(context.Background(), s, &Method[string]{Name: c.method}, c, row)
		var ip *InProgressError
		require.True(t, errors.As(err, &ip), "%v", err)
		return ip.RetryAfter
	}
	assert.Equal(t, 30*time.Second, retry(), "no duration known: the time left on the lock")
	for range 10 {
		s.recent.observe(c.method, 2*time.Second)
	}
	assert.Equal(t, 2*time.Second, retry(), "a 2s payout under a 30s lock")
}
