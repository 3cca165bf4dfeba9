package idemconnect

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// Defaults of a ClientConfig whose fields are zero; the same as
// idemhttp.Transport's.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
	DefaultMaxWait     = 30 * time.Second
)

// ClientConfig configures NewClientInterceptor. The zero value is usable.
type ClientConfig struct {
	// MaxAttempts bounds the attempts per call, the first included; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay is the first backoff; 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the backoff; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// MaxWait is the longest RetryInfo delay the interceptor waits for; a
	// longer one ends the retries. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// OnRetry, if set, is called before each retry with the attempt that
	// failed (1 for the first) and its error.
	OnRetry func(procedure string, attempt int, err error)
}

// NewClientInterceptor returns a client interceptor that keeps one
// idempotency key per intention: a call is one intention.
//
// A call of a procedure not declared IdempotencyNoSideEffects, whose
// request has no Idempotency-Key header and no AIP-155 request_id, gets a
// fresh random key (128 bits from crypto/rand, bare form) before its first
// attempt; a key the caller set is kept. The call is retried, with the same
// key, headers and message, when an attempt fails in transport (an error not
// sent by the server while the context is alive: a refused or reset
// connection, a lost response), when the server answers CodeUnavailable (the
// ledger unavailable), or CodeAborted with a google.rpc.RetryInfo (an
// attempt with the key is in progress), after at least the RetryInfo delay;
// never on another answer. Between attempts it waits a capped, jittered
// exponential backoff (BaseDelay, doubling, at most MaxDelay, drawn from its
// upper half). It stops after MaxAttempts attempts, when the context ends,
// when the next attempt would start after the context's deadline, or when
// the server asks for a wait longer than MaxWait, and returns the last error.
// Streams pass through.
func NewClientInterceptor(cfg ClientConfig) connect.Interceptor { return &client{cfg: cfg} }

type client struct{ cfg ClientConfig }

// WrapUnary implements connect.Interceptor.
func (c *client) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient || req.Spec().IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return next(ctx, req)
		}
		if id, _ := RequestID(req.Any()); id == "" && req.Header().Get(HeaderKey) == "" {
			req.Header().Set(HeaderKey, crand.Text())
		}
		sent := req.Header().Clone() // each attempt adds its own protocol headers
		attempts := orDefault(c.cfg.MaxAttempts, DefaultMaxAttempts)
		for attempt := 1; ; attempt++ {
			if attempt > 1 {
				reset(req.Header(), sent)
			}
			resp, err := next(ctx, req)
			if err == nil || attempt >= attempts || ctx.Err() != nil {
				return resp, err
			}
			d, retry := c.wait(err, attempt)
			retry = retry || transportError(err)
			if !retry {
				return resp, err
			}
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
				return resp, err
			}
			if c.cfg.OnRetry != nil {
				c.cfg.OnRetry(req.Spec().Procedure, attempt, err)
			}
			if werr := sleep(ctx, d); werr != nil {
				return nil, fmt.Errorf("idemconnect: %s: gave up after %d attempts: %w (last attempt: %w)", req.Spec().Procedure, attempt, werr, err)
			}
		}
	}
}

// reset makes h hold exactly the headers of want.
func reset(h, want http.Header) {
	clear(h)
	maps.Copy(h, want.Clone())
}

// wait returns how long to wait before retrying after an attempt that failed
// with err, and false when the call is not to be retried.
func (c *client) wait(err error, attempt int) (time.Duration, bool) {
	d := backoff(attempt, orDefault(c.cfg.BaseDelay, DefaultBaseDelay), orDefault(c.cfg.MaxDelay, DefaultMaxDelay))
	ra, hasRA := RetryDelay(err)
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
	case connect.CodeAborted:
		if !hasRA {
			return 0, false // a conflict the caller must resolve at a higher level
		}
	default:
		return 0, false
	}
	if hasRA {
		d = max(d, ra)
	}
	if d > orDefault(c.cfg.MaxWait, DefaultMaxWait) {
		return 0, false
	}
	return d, true
}

// transportError reports whether err is a failure of the exchange rather
// than an answer: not sent by the server (connect.IsWireError is false), with
// a code connect-go gives a reset or refused connection and a lost response.
// connect-go reports a connection reset mid-call as CodeCanceled although
// the caller's context is alive; the caller checks the context first.
func transportError(err error) bool {
	if connect.IsWireError(err) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeCanceled, connect.CodeUnknown, connect.CodeInternal:
		return true
	}
	return false
}

// WrapStreamingClient implements connect.Interceptor: streams pass through.
func (c *client) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: streams pass through.
func (c *client) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// backoff is the wait before attempt+1: base·2^(attempt-1), capped at
// limit, drawn uniformly from its upper half.
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
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
