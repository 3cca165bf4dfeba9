package transfers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// newTransferAPI serves POST /transfers with the generated wrapper behind
// runtime/idemhttp's middleware, exactly as a pgx service would: the
// middleware neither knows nor cares that the store is on database/sql.
func newTransferAPI(svc *IdempotentTransfers) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /transfers", func(w http.ResponseWriter, r *http.Request) {
		var req TransferRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := svc.Transfer(r.Context(), req)
		if idemhttp.WriteError(w, r, err) {
			return
		}
		switch {
		case errors.Is(err, ErrInsufficientFunds):
			http.Error(w, err.Error(), http.StatusPaymentRequired)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(resp)
	})
	return idemhttp.New(idemhttp.Config{Scope: func(r *http.Request) (string, error) {
		return r.Header.Get("X-Tenant"), nil
	}})(mux)
}

// post sends req to POST /transfers as tenant-a with key (none if empty) and
// returns the status, the Idempotent-Replayed header and the body.
func post(t *testing.T, url, key string, req TransferRequest) (int, string, string) {
	t.Helper()
	body, err := json.Marshal(req)
	require.NoError(t, err)
	hr, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/transfers", bytes.NewReader(body))
	require.NoError(t, err)
	hr.Header.Set("X-Tenant", "tenant-a")
	if key != "" {
		hr.Header.Set(idemhttp.HeaderKey, key)
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(idemhttp.HeaderReplayed), string(b)
}

// TestTransferOverHTTP drives the generated Transfer through the HTTP
// middleware on a store built from a *sql.DB: a retry replays the first
// answer (one transfer, balances moved once), a final error replays too, the
// key with another request is 422 and a missing key 400.
func TestTransferOverHTTP(t *testing.T) {
	tdb := idemtest.New(t, idemtest.WithMigrations(idemgenPackage.Migrations))
	store, err := idem.NewSQLStore(tdb.SQL)
	require.NoError(t, err)
	srv := httptest.NewServer(newTransferAPI(NewIdempotentTransfers(newTransfersForTest(t, tdb), store)))
	t.Cleanup(srv.Close)
	req := sampleTransfersTransferArgs(t)

	status, replayed, first := post(t, srv.URL, "rent-2026-12", req)
	require.Equal(t, http.StatusCreated, status, first)
	assert.Empty(t, replayed)
	status, replayed, again := post(t, srv.URL, "rent-2026-12", req)
	require.Equal(t, http.StatusCreated, status, again)
	assert.Equal(t, "true", replayed)
	assert.JSONEq(t, first, again, "the retry replays the first answer")
	assert.Equal(t, 1, countTransfersTransferEffects(t, tdb))
	balance, err := NewTransfers(tdb.SQL).queries.GetBalance(t.Context(), alice)
	require.NoError(t, err)
	assert.Equal(t, int64(seedCents-req.AmountCents), balance, "the retry moved no money")

	other := req
	other.AmountCents++
	status, _, body := post(t, srv.URL, "rent-2026-12", other)
	assert.Equal(t, http.StatusUnprocessableEntity, status, body)

	broke := req
	broke.AmountCents = 2 * seedCents
	status, replayed, first = post(t, srv.URL, "too-much", broke)
	require.Equal(t, http.StatusPaymentRequired, status, first)
	assert.Empty(t, replayed)
	status, replayed, again = post(t, srv.URL, "too-much", broke)
	assert.Equal(t, http.StatusPaymentRequired, status, again)
	assert.Equal(t, "true", replayed, "a final error is stored and replayed")
	assert.Equal(t, first, again)

	status, _, body = post(t, srv.URL, "", req)
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Equal(t, 1, countTransfersTransferEffects(t, tdb))
}
