package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// An external call whose outcome could not be recorded is answered with its
// own problem, not left to the handler: 500, no Retry-After, a type that says
// the outcome is unknown; and a retry of the key gets the same answer without
// running the call again.
func TestOutcomeNotRecordedOverHTTP(t *testing.T) {
	db := idemtest.New(t)
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := &idem.Method[receipt]{
		Name: "Test.Transfer",
		// The bank moved the money, but the response cannot be stored.
		Encode: func(receipt) ([]byte, error) { return nil, errors.New("encoder broken") },
	}
	var ran atomic.Int64
	mw := idemhttp.New(idemhttp.Config{SingleTenant: true})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := idem.External(r.Context(), s, m, fingerprint(m.Name, chargeReq{Amount: 1}), func(context.Context) (receipt, error) {
			ran.Add(1)
			return receipt{PaymentID: 1, Amount: 1}, nil
		})
		if idemhttp.WriteError(w, r, err) {
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway) // the handler's own mapping
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("ok"))
	})))
	t.Cleanup(srv.Close)
	a := &api{srv: srv}

	for _, attempt := range []string{"first", "retry"} {
		r := a.post(t, "/transfers", "acct_1", "tr-1", 1)
		require.Equal(t, http.StatusInternalServerError, r.status, "%s: %s", attempt, r.body)
		p := problemOf(t, r)
		assert.Equal(t, idemhttp.TypeOutcomeUnknown, p.Type, attempt)
		assert.Empty(t, r.retry, "%s: not an invitation to retry", attempt)
		assert.Contains(t, p.Detail, "not known whether it took effect", attempt)
		assert.False(t, strings.Contains(r.body, "encoder broken"), "%s: the cause stays in the server's logs", attempt)
	}
	assert.EqualValues(t, 1, ran.Load(), "the retry replayed the answer")
}
