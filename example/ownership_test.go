package example

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestOwnership: every query on tenant data checks the caller's account. One
// account cannot refund another's payment (404, as for a payment that does
// not exist), nor pay out of another's balance by naming it in the body.
func TestOwnership(t *testing.T) {
	db := idemtest.New(t, idemtest.WithMigrations(idemgenPackage.Migrations))
	bank := httptest.NewServer(NewFakeBank())
	t.Cleanup(bank.Close)
	store, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	api := httptest.NewServer(NewAPI(NewIdempotentPayments(NewPayments(db.Pool, &Bank{BaseURL: bank.URL}), store), slog.New(slog.DiscardHandler)))
	t.Cleanup(api.Close)

	post := func(path, acct, key, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+acct)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	count := func(query string, args ...any) int64 {
		t.Helper()
		var n int64
		require.NoError(t, db.Pool.QueryRow(t.Context(), query, args...).Scan(&n), query)
		return n
	}

	status, body := post("/v1/charges", "acct_victim", "charge-1",
		`{"amount_cents":1250,"currency":"EUR","card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"description":"victim's"}`)
	require.Equal(t, http.StatusCreated, status, body)
	require.Contains(t, body, `"payment_id":1,`)

	status, body = post("/v1/refunds", "acct_attacker", "refund-1", `{"payment_id":1,"amount_cents":1250,"reason":"mine now"}`)
	assert.Equal(t, http.StatusNotFound, status, body)
	status, body = post("/v1/refunds", "acct_attacker", "refund-2", `{"payment_id":999,"amount_cents":1,"reason":"probe"}`)
	assert.Equal(t, http.StatusNotFound, status, "a foreign payment and a missing one get one answer: %s", body)
	status, body = post("/v1/refunds", "acct_attacker", "refund-3", `{"account":"acct_victim","payment_id":1,"amount_cents":1250,"reason":"mine now"}`)
	assert.Equal(t, http.StatusBadRequest, status, "the account never comes from a refund's body: %s", body)
	status, body = post("/v1/payouts", "acct_attacker", "payout-1", `{"account":"acct_victim","amount_cents":1250}`)
	assert.Equal(t, http.StatusPaymentRequired, status, "a payout draws on the caller's balance, whatever the body says: %s", body)

	assert.Equal(t, int64(0), count(`SELECT count(*) FROM refunds`), "refunds")
	assert.Equal(t, int64(0), count(`SELECT refunded_cents FROM payments WHERE id = 1`), "refunded cents of the victim's payment")
	assert.Equal(t, int64(1250), count(`SELECT balance_cents FROM balances WHERE account = 'acct_victim'`), "the victim's balance")
	assert.Equal(t, int64(0), count(`SELECT count(*) FROM payouts`), "payouts")

	// The owner can refund it.
	status, body = post("/v1/refunds", "acct_victim", "refund-1", `{"payment_id":1,"amount_cents":500,"reason":"customer request"}`)
	assert.Equal(t, http.StatusCreated, status, body)
	assert.Equal(t, int64(750), count(`SELECT balance_cents FROM balances WHERE account = 'acct_victim'`), "the victim's balance after its own refund")
}
