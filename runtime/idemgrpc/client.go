package idemgrpc

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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

// ClientConfig configures UnaryClientInterceptor. The zero value is usable.
type ClientConfig struct {
	// MetadataKey is the metadata key the key is sent in; "" means
	// DefaultMetadataKey.
	MetadataKey string
	// MaxAttempts bounds the interceptor's attempts per call, the first
	// included; 0 means DefaultMaxAttempts. grpc-go's own retries happen
	// inside each of them.
	MaxAttempts int
	// BaseDelay is the first backoff; 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the backoff; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// MaxWait is the longest RetryInfo delay the interceptor waits for; a
	// longer one ends the retries. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// OnRetry, if set, is called before each retry with the attempt that
	// failed (1 for the first) and its error, e.g. to count retries.
	OnRetry func(fullMethod string, attempt int, err error)
}

// UnaryClientInterceptor returns a client interceptor that keeps one
// idempotency key per intention: a call is one intention.
//
// A call whose outgoing metadata has no key and whose request has no
// AIP-155 request_id gets a fresh random key (128 bits from crypto/rand)
// before its first attempt; a key the caller set is kept, and so is a
// request_id in any format (the server judges it: ServerConfig.RequestID). The key is put in
// the call's outgoing metadata, so every attempt carries it: the
// interceptor's own, and those made inside each of them (grpc-go's
// retryPolicy of the service config and transparent retries, and hedges
// sent by an interceptor chained after this one).
// Methods declared NO_SIDE_EFFECTS (see NoSideEffects) pass through.
//
// The interceptor retries the call, with the same key and request, when an
// attempt
//
//   - fails with an error that is not a status: the exchange broke before
//     any answer came back. grpc-go (v1.85) returns "max retries exhausted:
//     failed after N attempts: EOF" when the last attempt a retryPolicy
//     allows met a connection dropped after the call's stream opened and
//     before its message was sent (without a retryPolicy that attempt ends
//     with Unavailable); every answer a server sends is a status, so such
//     an error never is one;
//   - ends with codes.Unavailable: a connection that could not be made or
//     was lost (grpc-go's own transport errors), or the ledger unavailable;
//   - ends with codes.Aborted carrying a google.rpc.RetryInfo (an attempt
//     with the key is in progress), after at least the RetryInfo delay;
//
// and never on another status, codes.Unknown included: a handler's own
// error arrives as Unknown, and it is the answer, not a failure to get one.
// Between attempts it waits a capped, jittered exponential backoff
// (BaseDelay, doubling, at most MaxDelay, each wait drawn from its upper
// half). It stops after MaxAttempts attempts, when the call's context ends,
// when the next attempt would start after the call's deadline, or when the
// server asks for a wait longer than MaxWait; it then returns the last
// error.
func UnaryClientInterceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	c := &client{cfg: cfg, mdKey: strings.ToLower(cfg.MetadataKey), policy: idemretry.Policy{
		MaxAttempts: cfg.MaxAttempts, BaseDelay: cfg.BaseDelay, MaxDelay: cfg.MaxDelay, MaxWait: cfg.MaxWait,
	}}
	if c.mdKey == "" {
		c.mdKey = DefaultMetadataKey
	}
	return c.intercept
}

type client struct {
	cfg    ClientConfig
	mdKey  string
	policy idemretry.Policy
	reads  readOnly
}

func (c *client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.reads.is(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if requestID(req) == "" && len(md.Get(c.mdKey)) == 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, c.mdKey, crand.Text())
	}
	err := c.policy.Do(ctx, func(n int) error { return invoker(withPreviousAttempts(ctx, n-1), method, req, reply, cc, opts...) }, retryable, c.onRetry(method))
	if gaveUp, ok := err.(*idemretry.GaveUpError); ok {
		return fmt.Errorf("idemgrpc: %s: %w", method, gaveUp)
	}
	return err
}

// onRetry returns the OnRetry hook for calls of method, or nil.
func (c *client) onRetry(method string) func(int, error) {
	if c.cfg.OnRetry == nil {
		return nil
	}
	return func(attempt int, err error) { c.cfg.OnRetry(method, attempt, err) }
}

// retryable judges an attempt's error: a retry, with the RetryInfo delay it
// carries, if any, or the answer.
func retryable(err error) idemretry.Verdict {
	if err == nil {
		return idemretry.Verdict{}
	}
	st, isStatus := status.FromError(err)
	if !isStatus {
		// Not an answer: the exchange broke (grpc-go's "max retries
		// exhausted: … EOF"). A context's end is a status by now.
		return idemretry.Verdict{Retry: !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)}
	}
	hint, hinted := RetryDelay(st)
	switch st.Code() {
	case codes.Unavailable:
		return idemretry.Verdict{Retry: true, Hint: hint, Hinted: hinted}
	case codes.Aborted: // without RetryInfo: a conflict the caller must resolve at a higher level
		return idemretry.Verdict{Retry: hinted, Hint: hint, Hinted: hinted}
	}
	return idemretry.Verdict{}
}
