package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// TestTransportMarksItsRetries: every attempt after the first carries
// Idempotency-Previous-Attempts, and the middleware marks such a request a
// possible retry (idem.ContextWithRetry), so the idempotent call looks its
// key up before running the body again.
func TestTransportMarksItsRetries(t *testing.T) {
	var (
		mu       sync.Mutex
		previous []string
		marked   []bool
	)
	h := idemhttp.New(idemhttp.Config{SingleTenant: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		previous = append(previous, r.Header.Get(idemhttp.HeaderPreviousAttempts))
		marked = append(marked, idem.RetryFrom(r.Context()))
		if len(marked) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &idemhttp.Transport{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, []string{"", "1", "2"}, previous)
	assert.Equal(t, []bool{false, true, true}, marked)
}

// TestMiddlewareRetryMark: only a whole number above 0 marks a retry.
func TestMiddlewareRetryMark(t *testing.T) {
	for value, want := range map[string]bool{"": false, "0": false, "x": false, "-1": false, "1": true, " 3 ": true} {
		var got bool
		h := idemhttp.New(idemhttp.Config{SingleTenant: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = idem.RetryFrom(r.Context())
		}))
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header.Set(idemhttp.HeaderKey, `"k"`)
		if value != "" {
			req.Header.Set(idemhttp.HeaderPreviousAttempts, value)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		assert.Equal(t, want, got, "%s: %q", idemhttp.HeaderPreviousAttempts, value)
	}
}
