// Package idemretry is the retry schedule the clients of idemgen's
// transports share (runtime/idemhttp's Transport, runtime/idemgrpc's and
// runtime/idemconnect's client interceptors): how many attempts one
// intention gets, how long to wait between them, and when to stop waiting.
// What to retry is each transport's own; when, and for how long, is written
// here once.
package idemretry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a Policy whose fields are zero.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
	DefaultMaxWait     = 30 * time.Second
)

// Policy bounds the attempts of one intention. Zero or negative fields mean
// their defaults.
type Policy struct {
	// MaxAttempts bounds the attempts, the first included.
	MaxAttempts int
	// BaseDelay is the first backoff.
	BaseDelay time.Duration
	// MaxDelay caps the backoff.
	MaxDelay time.Duration
	// MaxWait is the longest delay a server may ask for (RetryInfo,
	// Retry-After); a longer one ends the retries.
	MaxWait time.Duration
}

// Next returns how long to wait after attempt (1 for the first) failed
// before the next one, given the delay the server asked for (hint, when
// hinted), and false when there is to be no next attempt: attempt was the
// last, ctx has ended, the server asked for more than MaxWait, or the wait
// would end after ctx's deadline. The wait is the larger of the hint and a
// capped, jittered exponential backoff: BaseDelay·2^(attempt-1), at most
// MaxDelay, drawn uniformly from its upper half.
func (p Policy) Next(ctx context.Context, attempt int, hint time.Duration, hinted bool) (time.Duration, bool) {
	if attempt >= orDefault(p.MaxAttempts, DefaultMaxAttempts) || ctx.Err() != nil {
		return 0, false
	}
	if hinted && hint > orDefault(p.MaxWait, DefaultMaxWait) {
		return 0, false
	}
	d := max(p.Backoff(attempt), hint)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return 0, false
	}
	return d, true
}

// Backoff returns the wait after attempt (1 for the first) when the server
// asked for none: BaseDelay·2^(attempt-1), at most MaxDelay, drawn uniformly
// from its upper half.
func (p Policy) Backoff(attempt int) time.Duration {
	d := orDefault(p.BaseDelay, DefaultBaseDelay)
	limit := orDefault(p.MaxDelay, DefaultMaxDelay)
	for i := 1; i < attempt && d < limit; i++ {
		d = min(d, limit/2) * 2 // never past limit's double: no overflow
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits d, or until ctx ends, and then returns context.Cause(ctx).
func Sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// orDefault returns v, or def when v is zero or negative.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
