package idemgrpc

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Defaults of a ClientConfig whose fields are zero; the same as
// idemhttp.Transport's.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
	DefaultMaxWait     = 30 * time.Second
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
// before its first attempt; a key the caller set is kept. The key is put in
// the call's outgoing metadata, so every attempt carries it: the
// interceptor's own, and those made inside each of them (grpc-go's
// retryPolicy of the service config and transparent retries, and hedges
// sent by an interceptor chained after this one).
// Methods declared NO_SIDE_EFFECTS (see NoSideEffects) pass through.
//
// The interceptor retries the call, with the same key and request, when an
// attempt ends with codes.Unavailable (a transport error: a refused or reset
// connection, a lost response; or the ledger unavailable) or with
// codes.Aborted carrying a google.rpc.RetryInfo (an attempt with the key is
// in progress), waiting at least the RetryInfo delay, and never on another
// code. Between attempts it waits a capped, jittered exponential backoff
// (BaseDelay, doubling, at most MaxDelay, each wait drawn from its upper
// half). It stops after MaxAttempts attempts, when the call's context ends,
// when the next attempt would start after the call's deadline, or when the
// server asks for a wait longer than MaxWait; it then returns the last
// error.
func UnaryClientInterceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	c := &client{cfg: cfg, mdKey: strings.ToLower(cfg.MetadataKey)}
	if c.mdKey == "" {
		c.mdKey = DefaultMetadataKey
	}
	return c.intercept
}

type client struct {
	cfg   ClientConfig
	mdKey string
	reads readOnly
}

func (c *client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.reads.is(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if id, _ := RequestID(req); id == "" && len(md.Get(c.mdKey)) == 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, c.mdKey, crand.Text())
	}
	attempts := orDefault(c.cfg.MaxAttempts, DefaultMaxAttempts)
	for attempt := 1; ; attempt++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || attempt >= attempts || ctx.Err() != nil {
			return err
		}
		d, retry := c.wait(status.Convert(err), attempt)
		if !retry {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return err // the next attempt would start after the deadline
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(method, attempt, err)
		}
		if werr := sleep(ctx, d); werr != nil {
			return fmt.Errorf("idemgrpc: %s: gave up after %d attempts: %w (last attempt: %w)", method, attempt, werr, err)
		}
	}
}

// wait returns how long to wait before retrying after an attempt that ended
// with st, and false when the call is not to be retried.
func (c *client) wait(st *status.Status, attempt int) (time.Duration, bool) {
	d := backoff(attempt, orDefault(c.cfg.BaseDelay, DefaultBaseDelay), orDefault(c.cfg.MaxDelay, DefaultMaxDelay))
	switch st.Code() {
	case codes.Unavailable:
		if ra, ok := RetryDelay(st); ok {
			d = max(d, ra)
		}
	case codes.Aborted:
		ra, ok := RetryDelay(st)
		if !ok {
			return 0, false // a conflict the caller must resolve at a higher level
		}
		d = max(d, ra)
	default:
		return 0, false
	}
	if d > orDefault(c.cfg.MaxWait, DefaultMaxWait) {
		return 0, false
	}
	return d, true
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
