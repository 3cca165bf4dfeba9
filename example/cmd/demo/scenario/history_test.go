package scenario

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The lossy-network test records every attempt idemhttp.Transport sends
// (the recording round tripper is its Base) in a history
// (internal/faults/linear), as the fault suite records its calls, and
// checks it for linearizability at the end.

// intentionKey keys, in a request's context, the intention the history
// names it by; idemhttp.Transport sends each attempt with the request's
// context.
type intentionKey struct{}

func withIntention(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, intentionKey{}, key)
}

// recording is an http.RoundTripper recording each attempt of an intention
// in rec. Its base opens a connection per attempt and sends it once, and
// the network is lossy between the client and the API only: a replay is
// another attempt's commit.
type recording struct {
	base http.RoundTripper
	rec  *linear.Recorder
}

func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	key, ok := req.Context().Value(intentionKey{}).(string)
	if !ok || req.GetBody == nil {
		return r.base.RoundTrip(req)
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", key, err)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", key, err)
	}
	call := r.rec.Begin(linear.Input{Key: key,
		Fingerprint: fmt.Sprintf("%s %x", req.Header.Get(idemhttp.HeaderKey), sha256.Sum256(raw))})
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		call.End(linear.Output{Answer: linear.Unknown})
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if err != nil {
		call.End(linear.Output{Answer: linear.Unknown}) // the answer was cut
		return resp, nil
	}
	call.End(httpOutput(resp, answer))
	return resp, nil
}

// httpOutput classifies an answer: a 201's value (rendered as the effect it
// names), an in-progress or mismatch problem, or else an answer whose
// outcome the caller cannot know (a lock lost, a 5xx).
func httpOutput(resp *http.Response, body []byte) linear.Output {
	if resp.StatusCode == http.StatusCreated {
		return linear.Output{Answer: linear.Value, Value: renderAnswer(body), Replayed: resp.Header.Get(idemhttp.HeaderReplayed) == "true"}
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	switch p.Type {
	case idemhttp.TypeInProgress:
		return linear.Output{Answer: linear.InProgress}
	case idemhttp.TypeMismatch:
		return linear.Output{Answer: linear.Mismatch}
	}
	return linear.Output{Answer: linear.Unknown}
}

// answer is what a charge's or a payout's 201 names.
type answer struct {
	PaymentID   int64  `json:"payment_id"`
	PayoutID    int64  `json:"payout_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	BankRef     string `json:"bank_ref"`
}

func renderAnswer(body []byte) string {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Sprintf("unreadable answer %q", body)
	}
	if a.PayoutID != 0 {
		return renderPayout(a.PayoutID, a.AmountCents, a.BankRef)
	}
	return renderPayment(a.PaymentID, a.AmountCents, a.Currency)
}

func renderPayment(id, cents int64, currency string) string {
	return fmt.Sprintf("payment %d: %d %s", id, cents, currency)
}

func renderPayout(id, cents int64, bankRef string) string {
	return fmt.Sprintf("payout %d: %d, bank %s", id, cents, bankRef)
}

// chargeIntention and payoutIntention are the history's keys: a charge by
// its description, a payout by its amount (each payout's is its own).
func chargeIntention(description string) string { return "charge " + description }
func payoutIntention(cents int64) string        { return fmt.Sprintf("payout of %d", cents) }

// readEffects reads the payments and the payouts (with the bank's
// reference a paid one has) at the end, by history key.
func readEffects(t *testing.T, db *idemtest.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rows, err := db.Pool.Query(t.Context(), `SELECT id, amount_cents, currency, description FROM payments`)
	require.NoError(t, err)
	for rows.Next() {
		var id, cents int64
		var currency, description string
		require.NoError(t, rows.Scan(&id, &cents, &currency, &description))
		k := chargeIntention(description)
		out[k] = append(out[k], renderPayment(id, cents, currency))
	}
	require.NoError(t, rows.Err())
	rows, err = db.Pool.Query(t.Context(), `SELECT id, amount_cents, coalesce(bank_ref, '') FROM payouts`)
	require.NoError(t, err)
	for rows.Next() {
		var id, cents int64
		var ref string
		require.NoError(t, rows.Scan(&id, &cents, &ref))
		k := payoutIntention(cents)
		out[k] = append(out[k], renderPayout(id, cents, ref))
	}
	require.NoError(t, rows.Err())
	return out
}

// checkHistory reads the effects into rec and checks its history: the test
// fails, naming porcupine's picture of the failing keys, if it is not
// linearizable. It proves the check can fail on this history: the same
// calls, with one more answered as a replay of another key's value
// (linear.Recorder.ForgeReplay), must be reported not linearizable. It
// returns the check of rec's history.
func checkHistory(t *testing.T, db *idemtest.DB, name string, rec *linear.Recorder) linear.Result {
	t.Helper()
	found := readEffects(t, db)
	forged, err := rec.ForgeReplay()
	require.NoError(t, err)
	rec.Observe(found)
	res, err := linear.Check(name, rec.History(), "", time.Minute)
	require.NoError(t, err)
	t.Logf("%s: %s (%d calls)", name, res, rec.Calls())
	assert.NoError(t, res.Err(), "%s", name)

	forged.Observe(found)
	bad, err := linear.Check(name+" with a forged replay", forged.History(), t.TempDir(), time.Minute)
	require.NoError(t, err)
	require.Error(t, bad.Err(), "a replay of another key's value is not linearizable")
	t.Logf("%s with a forged replay: %s: %v", name, bad, bad.Err())
	assert.Regexp(t, `^not linearizable: 1 of \d+ keys`, bad.Err().Error(), "only the forged call's key")
	assert.FileExists(t, bad.Picture)
	return res
}
