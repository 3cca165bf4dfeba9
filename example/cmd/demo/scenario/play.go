package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemgen/idemgen/example"
)

// Result holds what the demo observed; Play has already checked each value.
type Result struct {
	// Account is the merchant account (and idempotency scope) of the run.
	Account string

	// ChargeAttempts is how many times the client sent the charge.
	ChargeAttempts int
	// LostResponses is how many charge responses the network lost.
	LostResponses int
	// ChargeReplayed reports whether the retry carried Idempotent-Replayed: true.
	ChargeReplayed bool
	// BodiesIdentical reports whether the lost response and the retry's
	// response were byte for byte the same.
	BodiesIdentical bool
	// Payments is the number of payments rows of the account after step 1
	// and after step 2 (the same number, or Play fails).
	Payments int
	// LedgerEntries is the number of ledger_entries rows of that payment.
	LedgerEntries int
	// ChargeKeyRows is the number of idempotency_keys rows for the charge's key.
	ChargeKeyRows int

	// MismatchStatus is the status of the reused key with another amount.
	MismatchStatus int

	// TwinStatus is the status the twin got while the payout was in progress.
	TwinStatus int
	// TwinRetryAfter is the Retry-After header of that response.
	TwinRetryAfter string
	// PayoutStatus is the status of the payout itself.
	PayoutStatus int
	// PayoutReplayed reports whether the twin's retry replayed the payout's response.
	PayoutReplayed bool
	// BankCalls and BankTransfers are the transfer requests the bank
	// received and the transfers it executed.
	BankCalls, BankTransfers int
	// Payouts is the number of payouts rows of the account.
	Payouts int

	// DeclineStatus is the status of the charge with a declined card, and
	// DeclineRetryStatus of its retry, which DeclineReplayed says was a replay.
	DeclineStatus, DeclineRetryStatus int
	// DeclineReplayed reports whether the retry of the declined charge was a replay.
	DeclineReplayed bool

	// DepositReplayed reports whether the inline-mode deposit's retry was a
	// replay, and DepositRows how many payments rows carry its key.
	DepositReplayed bool
	DepositRows     int

	// Checks is the number of expectations that held.
	Checks int
}

// player plays the demo client against one Env.
type player struct {
	w     io.Writer
	env   *Env
	proxy *lossyProxy
	c     *client
	res   *Result

	chargeKey string // the key of step 1, reused in step 2
}

// Play runs the six steps of the demo against env, printing each attempt,
// status and check to w. It stops at the first expectation that fails and
// returns an error naming it.
func Play(ctx context.Context, w io.Writer, env *Env) (*Result, error) {
	proxy, err := startLossyProxy(env.APIURL)
	if err != nil {
		return nil, fmt.Errorf("start the lossy proxy: %w", err)
	}
	defer proxy.close()
	account := "acct_demo_" + strings.ReplaceAll(newKey(), "-", "")[:8]
	p := &player{w: w, env: env, proxy: proxy, c: newClient(account), res: &Result{Account: account}}
	defer p.c.http.CloseIdleConnections()

	p.printf("\nThe example payments service is up:\n")
	if len(env.Migrations) > 0 {
		p.printf("  migrations  applied with goose: %s\n", strings.Join(env.Migrations, ", "))
	} else {
		p.printf("  migrations  already applied\n")
	}
	p.printf("  API         %s  (POST /v1/charges, /v1/refunds, /v1/payouts, /v1/deposits)\n", env.APIURL)
	p.printf("  bank        %s  (fake; each transfer takes %s)\n", env.BankURL, env.BankDelay)
	p.printf("  network     %s  (a proxy to the API that can lose responses)\n", proxy.url)
	p.printf("  merchant    %s  (Authorization: Bearer %s; the idempotency scope)\n", account, account)

	for _, step := range []func(context.Context) error{p.lostResponse, p.reusedKey, p.slowPayout, p.declinedCard, p.inlineDeposit, p.outboxEmail} {
		if err := step(ctx); err != nil {
			return p.res, err
		}
	}
	p.printf("\nAll %d checks passed.\n", p.res.Checks)
	return p.res, nil
}

func (p *player) printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }

// check prints what was expected with a tick, or with a cross and returns an
// error naming it.
func (p *player) check(ok bool, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if !ok {
		p.printf("   ✗ %s\n", what)
		return fmt.Errorf("expectation failed: %s", what)
	}
	p.res.Checks++
	p.printf("   ✓ %s\n", what)
	return nil
}

// countRows runs a count(*) query.
func (p *player) countRows(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	if err := p.env.Pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// charge is the request of steps 1 and 2.
func (p *player) charge(cents int64, card string) example.ChargeRequest {
	return example.ChargeRequest{
		AmountCents: cents, Currency: "EUR",
		Card:        example.Card{Number: card, ExpMonth: 12, ExpYear: 2030},
		Description: "order 1042", Metadata: map[string]string{"order": "1042"},
	}
}

// lostResponse is step 1: the network loses the response to a charge; the
// client retries with the same key and gets the original response back.
func (p *player) lostResponse(ctx context.Context) error {
	key := newKey()
	p.chargeKey = key
	req := p.charge(1250, "4242424242424242")
	p.printf("\n1. Charge 12.50 EUR through a network that loses the first response\n")
	p.printf("   The client makes one key for this intention and sends it with every attempt:\n")
	p.printf("     Idempotency-Key: %s\n", key)
	p.proxy.loseNext(1)
	var final *reply
	for attempt := 1; final == nil; attempt++ {
		if attempt > 5 {
			return errors.New("expectation failed: the charge did not get a response in 5 attempts")
		}
		p.res.ChargeAttempts = attempt
		r, err := p.c.post(ctx, p.proxy.url, "/v1/charges", key, req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.res.LostResponses++
			p.printf("   attempt %d  POST /v1/charges  → no response (%v)\n", attempt, rootCause(err))
			p.printf("              Was the card charged? The client cannot tell, so it retries with the same key.\n")
			if err := sleep(ctx, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		p.printf("   attempt %d  POST /v1/charges  → %s\n", attempt, r)
		if r.Status >= 500 {
			if err := sleep(ctx, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		final = r
	}
	lost := p.proxy.lostBodies()
	if len(lost) > 0 {
		p.printf("   the response the network lost: %s\n", bytes.TrimSpace(lost[0]))
	}
	p.printf("   the response of the retry:     %s\n", final.body())
	p.res.ChargeReplayed = final.replayed()
	p.res.BodiesIdentical = len(lost) == 1 && bytes.Equal(lost[0], final.Body)
	var receipt example.Receipt
	if err := json.Unmarshal(final.Body, &receipt); err != nil && final.Status == http.StatusCreated {
		return fmt.Errorf("decode the receipt: %w", err)
	}
	var err error
	if p.res.Payments, err = p.countRows(ctx, `SELECT count(*) FROM payments WHERE account = $1`, p.res.Account); err != nil {
		return err
	}
	if p.res.LedgerEntries, err = p.countRows(ctx, `SELECT count(*) FROM ledger_entries WHERE payment_id = $1`, receipt.PaymentID); err != nil {
		return err
	}
	if p.res.ChargeKeyRows, err = p.countRows(ctx, `SELECT count(*) FROM idempotency_keys WHERE scope = $1 AND method = 'github.com/idemgen/idemgen/example.Payments.Charge' AND key = $2`,
		p.res.Account, key); err != nil {
		return err
	}
	return errors.Join(
		p.check(p.res.LostResponses == 1 && p.res.ChargeAttempts == 2, "%d attempts, the first response lost (want 2 attempts, 1 lost)", p.res.ChargeAttempts),
		p.check(final.Status == http.StatusCreated && p.res.ChargeReplayed, "the retry got 201 Created with Idempotent-Replayed: true"),
		p.check(p.res.BodiesIdentical, "the retry's response is the lost one, byte for byte"),
		p.check(p.res.Payments == 1, "%s in the database for %s (want 1: the card was charged once)", count(p.res.Payments, "payment"), p.res.Account),
		p.check(p.res.LedgerEntries == 2, "%s for payment %d (want 2: card debit, merchant credit)", count(p.res.LedgerEntries, "ledger entry", "ledger entries"), receipt.PaymentID),
		p.check(p.res.ChargeKeyRows == 1, "%s for the key (want 1)", count(p.res.ChargeKeyRows, "idempotency_keys row")),
	)
}

// reusedKey is step 2: the key of step 1 sent with another amount is
// refused with 422 and charges nothing.
func (p *player) reusedKey(ctx context.Context) error {
	key := p.chargeKey
	p.printf("\n2. The key of step 1 again, with another amount (99.00 EUR instead of 12.50)\n")
	r, err := p.c.post(ctx, p.env.APIURL, "/v1/charges", key, p.charge(9900, "4242424242424242"))
	if err != nil {
		return fmt.Errorf("charge with the reused key: %w", err)
	}
	p.res.MismatchStatus = r.Status
	p.printf("   POST /v1/charges  → %s\n", r)
	p.printf("     %s\n", r.body())
	payments, err := p.countRows(ctx, `SELECT count(*) FROM payments WHERE account = $1`, p.res.Account)
	if err != nil {
		return err
	}
	return errors.Join(
		p.check(r.Status == http.StatusUnprocessableEntity && strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json"),
			"refused with 422 and a problem document: one key names one request"),
		p.check(payments == p.res.Payments, "still %s for %s (want %d)", count(payments, "payment"), p.res.Account, p.res.Payments),
	)
}

// slowPayout is step 3: while a payout waits for the slow bank, its twin
// gets 409 with Retry-After; retried after the payout has finished, the twin
// gets the payout's response; the bank transferred once.
func (p *player) slowPayout(ctx context.Context) error {
	key := newKey()
	req := example.PayoutRequest{AmountCents: 500}
	p.printf("\n3. Pay 5.00 EUR out to the merchant's bank, which takes %s per transfer, and send a twin meanwhile\n", p.env.BankDelay)
	p.printf("     Idempotency-Key: %s\n", key)

	first := make(chan outcome, 1)
	go func() {
		r, err := p.c.post(ctx, p.env.APIURL, "/v1/payouts", key, req)
		first <- outcome{r, err}
	}()
	p.printf("   request A  POST /v1/payouts  sent; waiting until it holds the key")
	stop := Dots(p.w, 100*time.Millisecond)
	var early *outcome
	err := p.waitInProgress(ctx, key, first, &early)
	stop()
	p.printf("\n")
	if err != nil {
		return err
	}
	if early != nil {
		if early.err != nil {
			return fmt.Errorf("payout: %w", early.err)
		}
		return fmt.Errorf("expectation failed: the payout finished (%s) before its twin could be sent; is the bank delay too short?", early.r)
	}
	p.printf("   the ledger row is in_progress: A has claimed the key and is at the bank\n")

	twin, err := p.c.post(ctx, p.env.APIURL, "/v1/payouts", key, req)
	if err != nil {
		return fmt.Errorf("twin payout: %w", err)
	}
	p.res.TwinStatus, p.res.TwinRetryAfter = twin.Status, twin.Header.Get("Retry-After")
	p.printf("   request B  POST /v1/payouts  (same key, same body) → %s\n", twin)
	if err := p.check(twin.Status == http.StatusConflict && p.res.TwinRetryAfter != "",
		"the twin is told to come back later (409 with Retry-After), not run a second time"); err != nil {
		return err
	}
	p.printf("   Retry-After is the time left on A's lock (no payout has finished yet to estimate a duration from); B retries once A has answered.\n")

	p.printf("   waiting for the bank")
	stop = Dots(p.w, 250*time.Millisecond)
	var a outcome
	select {
	case a = <-first:
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
	stop()
	p.printf("\n")
	if a.err != nil {
		return fmt.Errorf("payout: %w", a.err)
	}
	p.res.PayoutStatus = a.r.Status
	p.printf("   request A  → %s\n     %s\n", a.r, a.r.body())
	again, err := p.c.post(ctx, p.env.APIURL, "/v1/payouts", key, req)
	if err != nil {
		return fmt.Errorf("twin payout, retried: %w", err)
	}
	p.printf("   request B, retried → %s\n     %s\n", again, again.body())
	p.res.PayoutReplayed = again.replayed() && bytes.Equal(again.Body, a.r.Body)
	p.res.BankCalls, p.res.BankTransfers = p.env.Bank.Calls(), p.env.Bank.Transfers()
	if p.res.Payouts, err = p.countRows(ctx, `SELECT count(*) FROM payouts WHERE account = $1`, p.res.Account); err != nil {
		return err
	}
	return errors.Join(
		p.check(a.r.Status == http.StatusCreated, "the payout succeeded (201 Created)"),
		p.check(p.res.PayoutReplayed, "B's retry replayed A's response (Idempotent-Replayed: true, same body)"),
		p.check(p.res.BankCalls == 1 && p.res.BankTransfers == 1,
			"the bank got %s and executed %s (want 1 and 1)", count(p.res.BankCalls, "transfer request"), count(p.res.BankTransfers, "transfer")),
		p.check(p.res.Payouts == 1, "%s in the database for %s (want 1)", count(p.res.Payouts, "payout"), p.res.Account),
	)
}

// outcome is what one request returned.
type outcome struct {
	r   *reply
	err error
}

// waitInProgress polls the ledger until the payout's row is in progress. If
// the payout answers first, it stores its outcome in *early.
func (p *player) waitInProgress(ctx context.Context, key string, first <-chan outcome, early **outcome) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var status string
		err := p.env.Pool.QueryRow(ctx, `SELECT status FROM idempotency_keys WHERE scope = $1 AND method = 'github.com/idemgen/idemgen/example.Payments.Payout' AND key = $2`,
			p.res.Account, key).Scan(&status)
		if err == nil && status == "in_progress" {
			return nil
		}
		select {
		case o := <-first:
			*early = &o
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("expectation failed: the payout did not claim its key within 10s")
		}
	}
}

// declinedCard is step 4: a declined card is a final answer, stored and
// replayed like a success.
func (p *player) declinedCard(ctx context.Context) error {
	key := newKey()
	req := p.charge(700, "4000000000000002")
	p.printf("\n4. Charge a card that is declined, then retry\n")
	p.printf("     Idempotency-Key: %s\n", key)
	r1, err := p.c.post(ctx, p.env.APIURL, "/v1/charges", key, req)
	if err != nil {
		return fmt.Errorf("declined charge: %w", err)
	}
	p.printf("   attempt 1  POST /v1/charges  → %s\n     %s\n", r1, r1.body())
	r2, err := p.c.post(ctx, p.env.APIURL, "/v1/charges", key, req)
	if err != nil {
		return fmt.Errorf("declined charge, retried: %w", err)
	}
	p.printf("   attempt 2  POST /v1/charges  → %s\n", r2)
	p.res.DeclineStatus, p.res.DeclineRetryStatus, p.res.DeclineReplayed = r1.Status, r2.Status, r2.replayed()
	payments, err := p.countRows(ctx, `SELECT count(*) FROM payments WHERE account = $1`, p.res.Account)
	if err != nil {
		return err
	}
	return errors.Join(
		p.check(r1.Status == http.StatusPaymentRequired, "the card was declined (402 Payment Required)"),
		p.check(r2.Status == http.StatusPaymentRequired && p.res.DeclineReplayed && bytes.Equal(r1.Body, r2.Body),
			"the retry replayed the decline (402, Idempotent-Replayed: true, same body): a final error is an answer"),
		p.check(payments == p.res.Payments, "still %s for %s (want %d)", count(payments, "payment"), p.res.Account, p.res.Payments),
	)
}

// count writes n and a noun, plural unless n is 1: count(2, "payment") is
// "2 payments"; an irregular plural comes second.
func count(n int, noun string, plural ...string) string {
	if n == 1 {
		return "1 " + noun
	}
	if len(plural) > 0 {
		return fmt.Sprintf("%d %s", n, plural[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rootCause returns the innermost error, e.g. "EOF" for a dropped connection.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
