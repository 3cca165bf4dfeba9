// Package idemretry is the retry schedule the clients of idemgen's
// transports share (runtime/idemhttp's Transport, runtime/idemgrpc's and
// runtime/idemconnect's client interceptors): how many attempts one
// intention gets, how long to wait between them, and when to stop waiting.
// What to retry is each transport's own; when, and for how long, is written
// here once.
package idemretry

import (
	"context"
	"fmt"
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

// Verdict is what a client makes of an attempt's outcome.
type Verdict struct {
	// Retry reports that the outcome is a failure to get an answer (or an
	// answer that asks for a retry), not the answer to return.
	Retry bool
	// Hint is the delay the server asked for, when Hinted.
	Hint   time.Duration
	Hinted bool
}

// Do makes the attempts of one intention: it calls attempt(1), attempt(2),
// ... and returns the error of the first whose judge's Verdict is not to
// retry, or of the last one Next allows. Before each wait it calls onRetry,
// if set, with the attempt that failed and its error. When ctx ends during
// a wait it returns a *GaveUpError.
func (p Policy) Do(ctx context.Context, attempt func(n int) error, judge func(err error) Verdict, onRetry func(n int, err error)) error {
	for n := 1; ; n++ {
		err := attempt(n)
		v := judge(err)
		if !v.Retry {
			return err
		}
		d, again := p.Next(ctx, n, v.Hint, v.Hinted)
		if !again {
			return err
		}
		if onRetry != nil {
			onRetry(n, err)
		}
		if werr := Sleep(ctx, d); werr != nil {
			return &GaveUpError{Attempts: n, Cause: werr, Last: err}
		}
	}
}

// GaveUpError is Do's error when the context ended while it waited to
// retry. errors.Is holds for the context's cause and for the last
// attempt's error.
type GaveUpError struct {
	Attempts int   // the attempts made
	Cause    error // context.Cause of the context that ended
	Last     error // the last attempt's error, nil if it had none
}

// Error says how many attempts were made, why the retries ended, and how
// the last attempt failed.
func (e *GaveUpError) Error() string {
	msg := fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Cause)
	if e.Last != nil {
		msg += fmt.Sprintf(" (last attempt: %v)", e.Last)
	}
	return msg
}

// Unwrap returns the cause and the last attempt's error.
func (e *GaveUpError) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.Last}
}

// Sleep waits d, or until ctx ends, and then returns context.Cause(ctx).
//
// A context that has ended, before the wait or by the time it is over, is
// always its error: when the timer and the context end together, select
// would pick either at random, and a retry would start on an ended context.
func Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// orDefault returns v, or def when v is zero or negative.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
