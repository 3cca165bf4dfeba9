package idemhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// attempt is what the scripted server saw of one request.
type attempt struct {
	key, body string
}

// scripted is a server that answers the n-th request with script[n] (the
// last entry repeats). A status of 0 drops the connection without an answer.
type scripted struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []answer
	seen   []attempt
}

type answer struct {
	status     int
	retryAfter string
}

func newScripted(t *testing.T, script ...answer) *scripted {
	s := &scripted{t: t, script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		s.mu.Lock()
		s.seen = append(s.seen, attempt{key: r.Header.Get(HeaderKey), body: string(body)})
		a := s.script[min(len(s.seen), len(s.script))-1]
		s.mu.Unlock()
		if a.status == 0 {
			conn, _, err := http.NewResponseController(w).Hijack()
			require.NoError(t, err)
			_ = conn.Close()
			return
		}
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, http.StatusText(a.status))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) attempts() []attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attempt(nil), s.seen...)
}

// newTransport returns a transport whose waits are recorded, not slept.
func newTransport(waits *[]time.Duration) *Transport {
	return &Transport{
		// Every attempt on a new connection, so a dropped one is not
		// silently resent by net/http itself.
		Base: &http.Transport{DisableKeepAlives: true},
		wait: func(ctx context.Context, d time.Duration) error {
			*waits = append(*waits, d)
			return ctx.Err()
		},
	}
}

func post(t *testing.T, ctx context.Context, tr http.RoundTripper, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestTransportRetriesOneIntentionWithOneKey(t *testing.T) {
	s := newScripted(t, answer{status: 0}, answer{status: 503}, answer{status: 409, retryAfter: "7"}, answer{status: 201})
	var waits []time.Duration
	tr := newTransport(&waits)
	resp := post(t, context.Background(), tr, s.srv.URL, `{"amount":100}`)
	assert.Equal(t, 201, resp.StatusCode)

	seen := s.attempts()
	require.Len(t, seen, 4, "a dropped connection, a 503 and a 409 are retried")
	key, err := ParseKey([]string{seen[0].key}, idem.DefaultKeyPolicy)
	require.NoError(t, err, "the key is a valid Idempotency-Key value: %q", seen[0].key)
	assert.True(t, strings.HasPrefix(seen[0].key, `"`), "the draft's quoted form")
	for i, a := range seen {
		assert.Equal(t, seen[0].key, a.key, "attempt %d has the first attempt's key", i+1)
		assert.Equal(t, `{"amount":100}`, a.body, "attempt %d has the whole body", i+1)
	}
	require.Len(t, waits, 3)
	assert.GreaterOrEqual(t, waits[2], 7*time.Second, "the 409's Retry-After is honoured")

	// The next intention gets a key of its own.
	post(t, context.Background(), tr, s.srv.URL, `{"amount":100}`)
	next, err := ParseKey([]string{s.attempts()[4].key}, idem.DefaultKeyPolicy)
	require.NoError(t, err)
	assert.NotEqual(t, key, next)
}

func TestTransportKeepsTheCallersKey(t *testing.T) {
	s := newScripted(t, answer{status: 500}, answer{status: 200})
	var waits []time.Duration
	tr := newTransport(&waits)
	tr.BareKey = true
	req, err := http.NewRequest(http.MethodPost, s.srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set(HeaderKey, "order-1042")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []attempt{{"order-1042", "x"}, {"order-1042", "x"}}, s.attempts())

	// BareKey: a new key goes out unquoted.
	post(t, context.Background(), tr, s.srv.URL, "y")
	assert.False(t, strings.HasPrefix(s.attempts()[2].key, `"`))
	assert.NotEmpty(t, s.attempts()[2].key)
}

func TestTransportNeverRetriesOtherClientErrors(t *testing.T) {
	for _, status := range []int{400, 401, 402, 404, 422, 429} {
		s := newScripted(t, answer{status: status}, answer{status: 201})
		var waits []time.Duration
		resp := post(t, context.Background(), newTransport(&waits), s.srv.URL, "x")
		assert.Equal(t, status, resp.StatusCode)
		assert.Len(t, s.attempts(), 1, "%d is the answer", status)
		assert.Empty(t, waits)
	}
}

// The outcome-unknown problem is not retried: the key replays it. The
// caller gets the whole problem. A service's own problem-type base does not
// change that.
func TestTransportDoesNotRetryAnUnknownOutcome(t *testing.T) {
	for name, base := range map[string]string{"default base": "", "service's base": "https://errors.example.com/idempotency/"} {
		t.Run(name, func(t *testing.T) { testNoRetryOfUnknownOutcome(t, base) })
	}
}

func testNoRetryOfUnknownOutcome(t *testing.T, base string) {
	var mu sync.Mutex
	attempts := 0
	mw := New(Config{SingleTenant: true, ProblemTypeBase: base})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		mu.Unlock()
		WriteError(w, r, fmt.Errorf("payout: %w", idem.ErrOutcomeNotRecorded))
	})))
	t.Cleanup(srv.Close)
	var waits []time.Duration
	resp := post(t, context.Background(), newTransport(&waits), srv.URL, "{}")
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var p Problem
	require.NoError(t, json.Unmarshal(body, &p), "the body is whole: %s", body)
	assert.True(t, strings.HasSuffix(p.Type, "outcome-unknown"), p.Type)
	if base != "" {
		assert.True(t, strings.HasPrefix(p.Type, base), p.Type)
	}
	mu.Lock()
	assert.Equal(t, 1, attempts, "sent once")
	mu.Unlock()
	assert.Empty(t, waits)
}

func TestTransportSendsAnUnreplayableBodyOnce(t *testing.T) {
	s := newScripted(t, answer{status: 503}, answer{status: 201})
	var waits []time.Duration
	req, err := http.NewRequest(http.MethodPost, s.srv.URL, io.NopCloser(strings.NewReader("x")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	resp, err := newTransport(&waits).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	require.Len(t, s.attempts(), 1)
	assert.NotEmpty(t, s.attempts()[0].key, "it still gets a key")
}

func TestTransportLeavesOtherMethodsAlone(t *testing.T) {
	s := newScripted(t, answer{status: 503}, answer{status: 200})
	var waits []time.Duration
	req, err := http.NewRequest(http.MethodGet, s.srv.URL, nil)
	require.NoError(t, err)
	resp, err := newTransport(&waits).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, []attempt{{"", ""}}, s.attempts())
	assert.Empty(t, req.Header.Get(HeaderKey), "the caller's request is not changed")
}

func TestTransportBounds(t *testing.T) {
	t.Run("attempts", func(t *testing.T) {
		s := newScripted(t, answer{status: 502})
		var waits []time.Duration
		tr := newTransport(&waits)
		tr.MaxAttempts = 3
		resp := post(t, context.Background(), tr, s.srv.URL, "x")
		assert.Equal(t, 502, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "Bad Gateway", string(body), "the last response is returned readable")
		assert.Len(t, s.attempts(), 3)
	})
	t.Run("context cancelled while waiting", func(t *testing.T) {
		s := newScripted(t, answer{status: 503})
		ctx, cancel := context.WithCancel(context.Background())
		tr := &Transport{wait: func(ctx context.Context, _ time.Duration) error { cancel(); return context.Cause(ctx) }}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		require.ErrorIs(t, err, context.Canceled)
		assert.Len(t, s.attempts(), 1)
	})
	t.Run("Retry-After past the deadline", func(t *testing.T) {
		s := newScripted(t, answer{status: 409, retryAfter: "7200"})
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		tr := &Transport{MaxWait: 3 * time.Hour, wait: func(context.Context, time.Duration) error {
			t.Error("no wait that ends after the deadline")
			return nil
		}}
		resp := post(t, ctx, tr, s.srv.URL, "x")
		assert.Equal(t, 409, resp.StatusCode)
		assert.Len(t, s.attempts(), 1)
	})
	t.Run("Retry-After longer than MaxWait", func(t *testing.T) {
		s := newScripted(t, answer{status: 503, retryAfter: "31"})
		var waits []time.Duration
		resp := post(t, context.Background(), newTransport(&waits), s.srv.URL, "x")
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.attempts(), 1)
		assert.Empty(t, waits)
	})
}

func TestTransportBackoff(t *testing.T) {
	tr := &Transport{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 100 {
			d := tr.policy().Backoff(attempt)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"3": 3 * time.Second, "0": 0, now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second} {
		got, ok := retryAfter(v, now)
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "-1", "soon"} {
		_, ok := retryAfter(v, now)
		assert.False(t, ok, v)
	}
}
