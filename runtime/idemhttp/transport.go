package idemhttp

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idemretry"
)

// Defaults of a Transport whose fields are zero: runtime/idemretry's, shared
// by the clients of runtime/idemgrpc and runtime/idemconnect.
const (
	DefaultMaxAttempts = idemretry.DefaultMaxAttempts
	DefaultBaseDelay   = idemretry.DefaultBaseDelay
	DefaultMaxDelay    = idemretry.DefaultMaxDelay
	DefaultMaxWait     = idemretry.DefaultMaxWait
)

// Transport is an http.RoundTripper for clients of any API that takes an
// Idempotency-Key: it keeps one key per intention, created before the first
// attempt, and retries that same request until an answer comes back.
//
// Each RoundTrip is one intention. A POST or PATCH request without an
// Idempotency-Key gets a fresh random one (128 bits from crypto/rand); a key
// the caller set is kept. A request carrying a key is retried, with the same
// key and body, when
//
//   - the round trip fails (a refused or reset connection, a lost response),
//   - the answer is 409 Conflict (an attempt with the key is still in
//     progress), after the response's Retry-After, or
//   - the answer is a 5xx, after Retry-After when the response has one,
//     except this package's outcome-unknown problem (the key replays it),
//
// and never on another status: a 4xx other than 409 is the answer. Every
// attempt after the first carries HeaderPreviousAttempts, so the server's
// middleware looks the key up before running the handler's body again. Between
// attempts it waits a capped, jittered exponential backoff (BaseDelay,
// doubling, at most MaxDelay, each wait drawn from its upper half). It stops
// after MaxAttempts attempts, when the request's context ends, or when the
// server asks it to wait longer than MaxWait or past the context's deadline;
// it then returns the last response, or the last error.
//
// A request whose body cannot be sent again (Body set, GetBody nil, as for a
// body that is not a *bytes.Buffer, *bytes.Reader or *strings.Reader given to
// http.NewRequest) gets its key but is sent once. Requests of other methods,
// and requests without a key, pass through untouched.
//
// Leave http.Client.Timeout unset or larger than the retries take: it bounds
// the whole exchange, retries included. Prefer a context deadline.
type Transport struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// MaxAttempts bounds the attempts per request, the first included;
	// 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay is the first backoff; 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the backoff; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// MaxWait is the longest Retry-After the transport waits for; a longer
	// one ends the retries and returns the response. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// BareKey sends a new key as the bare value (Idempotency-Key: abc), as
	// Stripe's clients do, instead of the draft's quoted Structured Field
	// string (Idempotency-Key: "abc"). The server of runtime/idemhttp
	// accepts both.
	BareKey bool

	// wait sleeps d or until ctx ends; nil means a timer. Tests replace it.
	wait func(ctx context.Context, d time.Duration) error
}

// RoundTrip sends req, retrying as the Transport's doc says.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Header.Get(HeaderKey) == "" {
		if req.Method != http.MethodPost && req.Method != http.MethodPatch {
			return base.RoundTrip(req)
		}
		req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
		key := crand.Text()
		if !t.BareKey {
			key = `"` + key + `"`
		}
		req.Header.Set(HeaderKey, key)
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return base.RoundTrip(req) // the body cannot be sent twice
	}

	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		try := req
		if attempt > 1 {
			var err error
			if try, err = rewind(req); err != nil {
				return nil, err
			}
			try.Header.Set(HeaderPreviousAttempts, strconv.Itoa(attempt-1))
		}
		resp, err := base.RoundTrip(try)
		if ctx.Err() != nil || !retryable(resp, err) {
			return resp, err
		}
		var hint time.Duration
		hinted := false
		if resp != nil {
			hint, hinted = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		d, again := t.policy().Next(ctx, attempt, hint, hinted)
		if !again {
			return resp, err
		}
		if resp != nil {
			drain(resp)
		}
		if werr := t.sleep(ctx, d); werr != nil {
			return nil, fmt.Errorf("idemhttp: Transport: %s %s: gave up after %d attempts: %w", req.Method, req.URL.Redacted(), attempt, werr)
		}
	}
}

// retryable reports whether an attempt's outcome calls for another.
func retryable(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	return resp.StatusCode == http.StatusConflict || resp.StatusCode >= 500 && !outcomeUnknown(resp)
}

// outcomeUnknown reports whether resp is the outcome-unknown problem
// (TypeOutcomeUnknown, or its name under a service's own
// Config.ProblemTypeBase), which every retry of the key would get again. It
// reads at most 4 KiB of the body and puts back what it read.
func outcomeUnknown(resp *http.Response) bool {
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != ContentTypeProblem {
		return false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	var p struct {
		Type string `json:"type"`
	}
	return err == nil && json.Unmarshal(head, &p) == nil &&
		strings.HasSuffix(p.Type, strings.TrimPrefix(TypeOutcomeUnknown, DefaultProblemTypeBase))
}

// rewind returns a copy of req with a fresh body for another attempt.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("idemhttp: Transport: %s %s: rewind the body: %w", req.Method, req.URL.Redacted(), err)
		}
		r.Body = body
	}
	return r, nil
}

// drain reads a little of a response that will not be returned, so its
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

// policy is the Transport's retry schedule.
func (t *Transport) policy() idemretry.Policy {
	return idemretry.Policy{MaxAttempts: t.MaxAttempts, BaseDelay: t.BaseDelay, MaxDelay: t.MaxDelay, MaxWait: t.MaxWait}
}

func (t *Transport) sleep(ctx context.Context, d time.Duration) error {
	if t.wait != nil {
		return t.wait(ctx, d)
	}
	return idemretry.Sleep(ctx, d)
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP-date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}
