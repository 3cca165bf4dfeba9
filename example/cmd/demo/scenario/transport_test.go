package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// flakyNetwork is a proxy that, by a seeded random draw per request, drops
// the request before it reaches the API, drops the API's response after the
// API handled it, or passes both on.
type flakyNetwork struct {
	rp  *httputil.ReverseProxy
	mu  sync.Mutex
	rnd *rand.Rand

	requestsLost, responsesLost, passed int
}

func startFlakyNetwork(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	n := &flakyNetwork{rp: httputil.NewSingleHostReverseProxy(u), rnd: rand.New(rand.NewPCG(16, 2026))}
	srv := httptest.NewServer(n)
	t.Cleanup(func() {
		srv.Close()
		n.mu.Lock()
		defer n.mu.Unlock()
		t.Logf("network: %d requests lost, %d responses lost, %d passed", n.requestsLost, n.responsesLost, n.passed)
		assert.Positive(t, n.requestsLost, "the network lost requests")
		assert.Positive(t, n.responsesLost, "the network lost responses")
	})
	return srv.URL
}

func (n *flakyNetwork) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	draw := n.rnd.IntN(10)
	switch {
	case draw < 2:
		n.requestsLost++
	case draw < 5:
		n.responsesLost++
	default:
		n.passed++
	}
	n.mu.Unlock()
	if draw >= 5 {
		n.rp.ServeHTTP(w, r)
		return
	}
	if draw >= 2 { // the API handles the request; its answer is lost
		n.rp.ServeHTTP(httptest.NewRecorder(), r)
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "lost", http.StatusBadGateway)
		return
	}
	_ = conn.Close()
}

// TestTransportOverALossyNetwork sends charges and payouts to the example
// API through a network that loses a fifth of the requests and a third of
// the responses, with a client built on idemhttp.Transport that sets no key
// itself: every intention is answered, and each had exactly one effect; the
// history of its attempts is linearizable.
func TestTransportOverALossyNetwork(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	env, err := Start(t.Context(), db.URL, Options{BankDelay: -1})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		assert.NoError(t, env.Close(ctx))
	})
	api := startFlakyNetwork(t, env.APIURL)

	// Each attempt is recorded in a history, checked at the end.
	rec := linear.NewRecorder()
	client := &http.Client{Transport: &idemhttp.Transport{
		// A new connection per attempt, so each attempt meets the network.
		Base:        recording{base: &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 30 * time.Second}, rec: rec},
		MaxAttempts: 30,
		BaseDelay:   time.Millisecond,
		MaxDelay:    10 * time.Millisecond,
	}}
	send := func(intention, path string, body any) map[string]any {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(withIntention(t.Context(), intention), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer acct_42")
		resp, err := client.Do(req)
		require.NoError(t, err, "%s %s", path, b)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s %s: %s", path, b, raw)
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		return out
	}

	const charges, payouts = 20, 5
	ids := map[any]bool{}
	for i := range charges {
		r := send(chargeIntention(fmt.Sprintf("order %d", i)), "/v1/charges", map[string]any{
			"amount_cents": 1000 + i, "currency": "EUR", "description": fmt.Sprintf("order %d", i),
			"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030},
		})
		ids[r["payment_id"]] = true
	}
	assert.Len(t, ids, charges, "one payment per charge")
	for i := range payouts { // each its own amount, which names it in the history
		send(payoutIntention(int64(100+i)), "/v1/payouts", map[string]any{"amount_cents": 100 + i})
	}

	count := func(query string) int {
		t.Helper()
		var n int
		require.NoError(t, db.Pool.QueryRow(t.Context(), query).Scan(&n), query)
		return n
	}
	assert.Equal(t, charges, count(`SELECT count(*) FROM payments`), "payments: one per intention")
	assert.Equal(t, 2*charges, count(`SELECT count(*) FROM ledger_entries`), "ledger entries: two per payment")
	assert.Equal(t, payouts, count(`SELECT count(*) FROM payouts WHERE status = 'paid'`), "payouts: one per intention")
	assert.Equal(t, payouts, env.Bank.Transfers(), "transfers at the bank: one per intention")
	assert.Equal(t, charges+payouts, count(`SELECT count(*) FROM idempotency_keys`), "ledger rows: one key per intention")
	checkHistory(t, db, "lossy network, idemhttp.Transport", rec)
}
