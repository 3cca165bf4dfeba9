package idemhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the response wrapper directly with a replay flag, so the
// header's timing is checked for every way a handler can start a response.
// The end-to-end path (a real idempotent call replaying against PostgreSQL)
// is covered in replay_test.go.

func TestReplayHeaderTiming(t *testing.T) {
	steps := map[string]func(w http.ResponseWriter){
		"WriteHeader": func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) },
		"Write":       func(w http.ResponseWriter) { _, _ = io.WriteString(w, "body") },
		"ReadFrom":    func(w http.ResponseWriter) { _, _ = io.Copy(w, strings.NewReader("body")) },
		"Flush":       func(w http.ResponseWriter) { w.(http.Flusher).Flush() },
		"ResponseController.Flush": func(w http.ResponseWriter) {
			_ = http.NewResponseController(w).Flush()
		},
		"nothing written": func(http.ResponseWriter) {},
	}
	for name, step := range steps {
		for _, replayed := range []bool{false, true} {
			t.Run(name+"/replayed="+map[bool]string{false: "no", true: "yes"}[replayed], func(t *testing.T) {
				rec := httptest.NewRecorder()
				w := &responseWriter{ResponseWriter: rec, replayed: func() bool { return replayed }}
				step(w)
				w.finish()
				if replayed {
					assert.Equal(t, []string{"true"}, rec.Result().Header.Values(HeaderReplayed))
				} else {
					assert.Empty(t, rec.Result().Header.Values(HeaderReplayed))
				}
			})
		}
	}
}

// TestReplayHeaderOnlyBeforeStatus: the flag is read when the status goes
// out; a replay discovered after that cannot change the response.
func TestReplayHeaderOnlyBeforeStatus(t *testing.T) {
	var replayed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &responseWriter{ResponseWriter: rw, replayed: replayed.Load}
		w.WriteHeader(http.StatusOK)
		replayed.Store(true)
		_, _ = io.WriteString(w, "late")
		w.finish()
	}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Empty(t, resp.Header.Values(HeaderReplayed))
}

// TestReplayHeaderAfterEarlyHints: a 1xx status does not end the header
// phase, so the final response still gets the header (on a real server;
// the recorder does not model 1xx responses).
func TestReplayHeaderAfterEarlyHints(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &responseWriter{ResponseWriter: rw, replayed: func() bool { return true }}
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		w.finish()
	}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, []string{"true"}, resp.Header.Values(HeaderReplayed))
}

func TestResponseWriterUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &responseWriter{ResponseWriter: rec, replayed: func() bool { return false }}
	assert.Same(t, rec, w.Unwrap())

	// A writer that cannot flush: ResponseController reports it instead of
	// pretending, and Flush does not panic.
	plain := &responseWriter{ResponseWriter: struct{ http.ResponseWriter }{rec}, replayed: func() bool { return false }}
	assert.ErrorIs(t, http.NewResponseController(plain).Flush(), http.ErrNotSupported)
	assert.NotPanics(t, plain.Flush)
}

// The retention is advertised in whole seconds, rounded up, and only once an
// idempotent call reported one.
func TestRetentionHeader(t *testing.T) {
	for _, tt := range []struct {
		retention time.Duration
		want      string
	}{{48 * time.Hour, "172800"}, {90*time.Second + time.Millisecond, "91"}, {0, ""}} {
		rec := httptest.NewRecorder()
		w := &responseWriter{ResponseWriter: rec, replayed: func() bool { return false }, retention: func() time.Duration { return tt.retention }}
		w.WriteHeader(http.StatusCreated)
		assert.Equal(t, tt.want, rec.Header().Get(HeaderRetention), "retention %s", tt.retention)
	}
}
