package idemhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// Keys are per tenant: a middleware that would let every caller share one
// key space must be asked for by name, never be what a forgotten field gives.
func TestNewRefusesAnImplicitScope(t *testing.T) {
	assert.PanicsWithValue(t, idemhttp.ErrNoScope, func() { idemhttp.New(idemhttp.Config{}) },
		"neither Scope nor SingleTenant")
	assert.PanicsWithValue(t, idemhttp.ErrNoScope, func() {
		idemhttp.New(idemhttp.Config{SingleTenant: true, Scope: func(*http.Request) (string, error) { return "a", nil }})
	}, "both")
	assert.NotPanics(t, func() { idemhttp.New(idemhttp.Config{SingleTenant: true}) })
	assert.NotPanics(t, func() {
		idemhttp.New(idemhttp.Config{Scope: func(*http.Request) (string, error) { return "a", nil }})
	})
}

// A scope the ledger could not hold is the caller's problem, answered before
// the handler runs, with the reason: never the ledger's 503, which invites
// endless retries.
func TestScopeTheLedgerCannotHoldIsRefused(t *testing.T) {
	for name, scope := range map[string]string{
		"invalid UTF-8": "acct_\xff",
		"NUL byte":      "acct_\x00",
		"too long":      strings.Repeat("a", idem.MaxScopeLen+1),
	} {
		t.Run(name, func(t *testing.T) {
			var s seen
			h := idemhttp.New(idemhttp.Config{Scope: func(*http.Request) (string, error) { return scope, nil }})(recordingHandler(&s))
			w := serve(h, http.MethodPost, "/charges", http.Header{idemhttp.HeaderKey: {"k"}})
			require.Equal(t, http.StatusForbidden, w.Code)
			assert.False(t, s.called, "the handler did not run")
			assert.Contains(t, w.Body.String(), "cannot scope an Idempotency-Key")
			assert.NotContains(t, w.Body.String(), scope, "the scope is not echoed")
		})
	}
}
