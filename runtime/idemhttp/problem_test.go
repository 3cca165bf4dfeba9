package idemhttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

func TestWriteError(t *testing.T) {
	mismatch := &idem.MismatchError{Method: "Payments.Charge", Key: "key-7", Stored: []byte{0xde, 0xad, 0xbe, 0xef}, Got: []byte{0xca, 0xfe, 0xba, 0xbe}}
	dbDown := errors.New(`dial unix /var/run/postgresql/.s.PGSQL.5432: connect: connection refused (user "payments_rw")`)
	tests := []struct {
		name       string
		err        error
		status     int
		typ        string
		title      string
		detail     string // substring of the detail
		retryAfter string
		secrets    []string // must not appear in the body
	}{
		{
			name: "mismatch", err: fmt.Errorf("charge: %w", mismatch),
			status: http.StatusUnprocessableEntity, typ: idemhttp.TypeMismatch, title: "Idempotency-Key is already used",
			detail: "already used with a different request", secrets: []string{"key-7", "deadbeef", "cafebabe", "Payments.Charge"},
		},
		{
			name: "mismatch sentinel", err: fmt.Errorf("charge: %w", idem.ErrMismatch),
			status: http.StatusUnprocessableEntity, typ: idemhttp.TypeMismatch, title: "Idempotency-Key is already used", detail: "Send a new key for a new request",
		},
		{
			name: "in progress", err: fmt.Errorf("payout: %w", &idem.InProgressError{Method: "Payments.Payout", Key: "po-1", RetryAfter: 2500 * time.Millisecond}),
			status: http.StatusConflict, typ: idemhttp.TypeInProgress, title: "A request is outstanding for this Idempotency-Key",
			detail: "Retry in 3 seconds", retryAfter: "3", secrets: []string{"po-1", "Payments.Payout"},
		},
		{
			name: "in progress sentinel", err: idem.ErrInProgress,
			status: http.StatusConflict, typ: idemhttp.TypeInProgress, title: "A request is outstanding for this Idempotency-Key",
			detail: "Retry in 1 second ", retryAfter: "1",
		},
		{
			name: "lock lost", err: fmt.Errorf("idem: Payments.Payout: key %q: %w", "po-2", idem.ErrLockLost),
			status: http.StatusConflict, typ: idemhttp.TypeLockLost, title: "Idempotent request taken over",
			detail: "another attempt took the request over", retryAfter: "1", secrets: []string{"po-2"},
		},
		{
			name: "invalid key", err: fmt.Errorf("Payments.Charge: %w", &idem.KeyError{Reason: "byte 3 (0x0a) is not a visible ASCII character"}),
			status: http.StatusBadRequest, typ: idemhttp.TypeInvalidKey, title: "Idempotency-Key is invalid",
			detail: "malformed: byte 3 (0x0a) is not a visible ASCII character",
		},
		{
			name: "invalid key with unprintable reason", err: &idem.KeyError{Reason: "bad \x1b[2J byte"},
			status: http.StatusBadRequest, typ: idemhttp.TypeInvalidKey, title: "Idempotency-Key is invalid",
			detail: "malformed: bad ?[2J byte", secrets: []string{"\x1b"},
		},
		{
			name: "invalid key sentinel", err: idem.ErrInvalidKey,
			status: http.StatusBadRequest, typ: idemhttp.TypeInvalidKey, title: "Idempotency-Key is invalid", detail: "malformed. Send the header once",
		},
		{
			// A wrapper called with a scope the service put in the context
			// itself, not through the middleware: WriteError answered false,
			// and the service its own 500.
			name: "invalid scope", err: fmt.Errorf("Payments.Charge: %w", &idem.ScopeError{Reason: "not valid UTF-8"}),
			status: http.StatusForbidden, typ: idemhttp.TypeScopeUnknown, title: "Request scope unknown",
			detail: "cannot scope an Idempotency-Key: not valid UTF-8. Check the request's credentials.",
		},
		{
			name: "no key", err: fmt.Errorf("Payments.Charge: %w", idem.ErrNoKey),
			status: http.StatusBadRequest, typ: idemhttp.TypeMissingKey, title: "Idempotency-Key is missing", detail: "requires an Idempotency-Key header",
		},
		{
			name: "store down", err: fmt.Errorf("%w: Payments.Charge: acquire connection: %w", idem.ErrStore, dbDown),
			status: http.StatusServiceUnavailable, typ: idemhttp.TypeStoreUnavailable, title: "Idempotency ledger unavailable",
			detail: "Retry later with the same Idempotency-Key", secrets: []string{"postgresql", "refused", "payments_rw", "Payments.Charge"},
		},
		{
			name: "outcome not recorded", err: fmt.Errorf("idem: Payments.Payout: key %q: %w: encode response: boom", "po-3", idem.ErrOutcomeNotRecorded),
			status: http.StatusInternalServerError, typ: idemhttp.TypeOutcomeUnknown, title: "Outcome of the idempotent request is unknown",
			detail: "do not send the request under a new key", secrets: []string{"po-3", "boom", "Payments.Payout"},
		},
		{
			name: "outcome not recorded, replayed", err: &idem.ReplayedError{Name: "idem:outcome-not-recorded", Msg: "idem: ...", Sentinel: idem.ErrOutcomeNotRecorded},
			status: http.StatusInternalServerError, typ: idemhttp.TypeOutcomeUnknown, title: "Outcome of the idempotent request is unknown",
			detail: "Retrying with this Idempotency-Key returns this answer again",
		},
		{
			name: "outcome not recorded, nor that failure", err: fmt.Errorf("%w (storing this failed too: %w)", idem.ErrOutcomeNotRecorded, fmt.Errorf("%w: dial: refused", idem.ErrStore)),
			status: http.StatusServiceUnavailable, typ: idemhttp.TypeStoreUnavailable, title: "Idempotency ledger unavailable",
			detail: "Retry later",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/charges?amount=5", nil)
			require.True(t, idemhttp.WriteError(w, r, tt.err))
			require.Equal(t, tt.status, w.Code)
			assert.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"))
			assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
			for _, s := range tt.secrets {
				assert.NotContains(t, w.Body.String(), s)
			}
			p := decodeProblem(t, w)
			assert.Equal(t, idemhttp.Problem{
				Type: tt.typ, Title: tt.title, Status: tt.status, Detail: p.Detail, Instance: "/charges",
			}, p)
			assert.Contains(t, p.Detail, tt.detail)
		})
	}
}

func TestWriteErrorUnknown(t *testing.T) {
	for name, err := range map[string]error{
		"nil":           nil,
		"other":         errors.New("card declined"),
		"replayed":      &idem.ReplayedError{Name: "ErrCardDeclined", Msg: "card declined"},
		"wrapped other": fmt.Errorf("charge: %w", errors.New("insufficient funds")),
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			assert.False(t, idemhttp.WriteError(w, httptest.NewRequest(http.MethodPost, "/charges", nil), err))
			assert.False(t, w.Flushed)
			assert.Empty(t, w.Header(), "nothing is written")
			assert.Zero(t, w.Body.Len())
		})
	}
}

func TestRetryAfterRounding(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + time.Millisecond, "60"},
		{90 * time.Second, "90"},
		{time.Hour, "3600"},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			w := httptest.NewRecorder()
			require.True(t, idemhttp.WriteError(w, nil, &idem.InProgressError{RetryAfter: tt.d}))
			assert.Equal(t, tt.want, w.Header().Get("Retry-After"))
			p := decodeProblem(t, w)
			assert.Contains(t, p.Detail, "Retry in "+tt.want+" second")
			assert.Empty(t, p.Instance, "no request, no instance")
		})
	}
}

func TestWriteProblemInstanceIsEscaped(t *testing.T) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/charges/%0A%1B%3Cscript%3E/refunds", nil)
	idemhttp.WriteProblem(w, r, idemhttp.Problem{Type: "about:blank", Title: "Teapot", Status: http.StatusTeapot})
	require.Equal(t, http.StatusTeapot, w.Code)
	p := decodeProblemLenient(t, w)
	assert.Equal(t, "/charges/%0A%1B%3Cscript%3E/refunds", p.Instance)
}

// decodeProblemLenient is decodeProblem for problems without a detail.
func decodeProblemLenient(t *testing.T, w *httptest.ResponseRecorder) idemhttp.Problem {
	t.Helper()
	assert.Equal(t, idemhttp.ContentTypeProblem, w.Header().Get("Content-Type"))
	var p idemhttp.Problem
	require.NoError(t, json.NewDecoder(w.Body).Decode(&p))
	return p
}
