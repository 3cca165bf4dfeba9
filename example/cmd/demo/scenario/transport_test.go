package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
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

// lossyLong runs TestTransportOverALossyNetwork with 3,600 charges and 400
// payouts, 8 intentions at a time, for a history of more than 10,000
// operations.
var lossyLong = flag.Bool("lossy.long", false, "run the lossy-network test with 3,600 charges and 400 payouts, 8 at a time, instead of 20 and 5 one at a time")

// lossyCounts are the charges and payouts of the lossy-network test, and
// how many intentions it sends at once.
func lossyCounts() (charges, payouts, parallel int) {
	if *lossyLong {
		return 3600, 400, 8
	}
	return 20, 5, 1
}

// eachOf calls fn(0) to fn(n-1) from parallel goroutines, in order when
// parallel is 1, and waits for them.
func eachOf(n, parallel int, fn func(i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range parallel {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// lossyClient is a client built on idemhttp.Transport, recording each
// attempt in rec, with a new connection per attempt, so each attempt meets
// the network.
func lossyClient(rec *linear.Recorder) *http.Client {
	return &http.Client{Transport: &idemhttp.Transport{
		Base:        recording{base: &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 30 * time.Second}, rec: rec},
		MaxAttempts: 30,
		BaseDelay:   time.Millisecond,
		MaxDelay:    10 * time.Millisecond,
	}}
}

// sendIntention posts body to api+path as intention (one key for all its
// attempts, set by the transport) and returns the 201's answer.
func sendIntention(ctx context.Context, client *http.Client, api, intention, path string, body any) (map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", intention, err)
	}
	ctx, cancel := context.WithTimeout(withIntention(ctx, intention), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", intention, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer acct_42")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", intention, path, b, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: read the answer: %w", intention, path, b, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("%s %s %s: answered %d: %s", intention, path, b, resp.StatusCode, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s %s: answer %s: %w", intention, path, raw, err)
	}
	return out, nil
}

// TestTransportOverALossyNetwork sends charges and payouts to the example
// API through a network that loses a fifth of the requests and a third of
// the responses, with a client built on idemhttp.Transport that sets no key
// itself: every intention is answered, and each had exactly one effect; the
// history of its attempts is linearizable. With -lossy.long it sends 4,000
// intentions, 8 at a time, and checks at least 10,000 operations.
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
	client := lossyClient(rec)
	charges, payouts, parallel := lossyCounts()
	paymentIDs := make([]any, charges)
	eachOf(charges, parallel, func(i int) {
		r, err := sendIntention(t.Context(), client, api, chargeIntention(fmt.Sprintf("order %d", i)), "/v1/charges", map[string]any{
			"amount_cents": 1000 + i, "currency": "EUR", "description": fmt.Sprintf("order %d", i),
			"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030},
		})
		if assert.NoError(t, err) {
			paymentIDs[i] = r["payment_id"]
		}
	})
	ids := map[any]bool{}
	for _, id := range paymentIDs {
		ids[id] = true
	}
	assert.Len(t, ids, charges, "one payment per charge")
	eachOf(payouts, parallel, func(i int) { // each its own amount, which names it in the history
		_, err := sendIntention(t.Context(), client, api, payoutIntention(int64(100+i)), "/v1/payouts", map[string]any{"amount_cents": 100 + i})
		assert.NoError(t, err)
	})

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
	res := checkHistory(t, db, "lossy network, idemhttp.Transport", rec)
	if *lossyLong {
		assert.GreaterOrEqual(t, res.Operations, 10000, "operations checked in the long mode")
	}
}
