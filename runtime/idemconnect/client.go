package idemconnect

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/idemgen/idemgen/runtime/idemretry"
)

// Defaults of a ClientConfig whose fields are zero: runtime/idemretry's,
// the same as idemhttp.Transport's.
const (
	DefaultMaxAttempts = idemretry.DefaultMaxAttempts
	DefaultBaseDelay   = idemretry.DefaultBaseDelay
	DefaultMaxDelay    = idemretry.DefaultMaxDelay
	DefaultMaxWait     = idemretry.DefaultMaxWait
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
func NewClientInterceptor(cfg ClientConfig) connect.Interceptor {
	return &client{cfg: cfg, policy: idemretry.Policy{
		MaxAttempts: cfg.MaxAttempts, BaseDelay: cfg.BaseDelay, MaxDelay: cfg.MaxDelay, MaxWait: cfg.MaxWait,
	}}
}

type client struct {
	cfg    ClientConfig
	policy idemretry.Policy
}

// WrapUnary implements connect.Interceptor.
func (c *client) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient || req.Spec().IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return next(ctx, req)
		}
		if requestID(req.Any()) == "" && req.Header().Get(HeaderKey) == "" {
			req.Header().Set(HeaderKey, crand.Text())
		}
		sent := req.Header().Clone() // each attempt adds its own protocol headers
		var resp connect.AnyResponse
		err := c.policy.Do(ctx, func(attempt int) error {
			if attempt > 1 {
				reset(req.Header(), sent)
				req.Header().Set(HeaderPreviousAttempts, strconv.Itoa(attempt-1))
			}
			var err error
			resp, err = next(ctx, req)
			return err
		}, retryable, c.onRetry(req.Spec().Procedure))
		if gaveUp, ok := err.(*idemretry.GaveUpError); ok {
			return nil, fmt.Errorf("idemconnect: %s: %w", req.Spec().Procedure, gaveUp)
		}
		return resp, err
	}
}

// onRetry returns the OnRetry hook for calls of procedure, or nil.
func (c *client) onRetry(procedure string) func(int, error) {
	if c.cfg.OnRetry == nil {
		return nil
	}
	return func(attempt int, err error) { c.cfg.OnRetry(procedure, attempt, err) }
}

// reset makes h hold exactly the headers of want.
func reset(h, want http.Header) {
	clear(h)
	maps.Copy(h, want.Clone())
}

// retryable judges an attempt's error: a retry, with the RetryInfo delay it
// carries, if any, or the answer. A retry is a failure of the exchange
// rather than an answer (not sent by the server, connect.IsWireError false,
// with a code connect-go gives a reset or refused connection and a lost
// response; connect-go reports a connection reset mid-call as CodeCanceled
// although the caller's context is alive, which Next checks),
// CodeUnavailable, or CodeAborted with RetryInfo.
func retryable(err error) idemretry.Verdict {
	if err == nil {
		return idemretry.Verdict{}
	}
	hint, hinted := RetryDelay(err)
	switch code := connect.CodeOf(err); {
	case code == connect.CodeUnavailable, code == connect.CodeAborted && hinted:
		return idemretry.Verdict{Retry: true, Hint: hint, Hinted: hinted}
	case !connect.IsWireError(err):
		switch code {
		case connect.CodeCanceled, connect.CodeUnknown, connect.CodeInternal:
			return idemretry.Verdict{Retry: true}
		}
	}
	return idemretry.Verdict{}
}

// WrapStreamingClient implements connect.Interceptor: streams pass through.
func (c *client) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: streams pass through.
func (c *client) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
