package scenario

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/example"
)

// inlineDeposit is step 5: a deposit, whose key lives in its own payments
// row (inline mode, payments.idempotency_key), through a network that loses
// the first response. The retry replays the row; there is one payment for the
// key and no ledger row at all.
func (p *player) inlineDeposit(ctx context.Context) error {
	key := newKey()
	req := example.DepositRequest{AmountCents: 2000, Currency: "EUR", Description: "counter 3"}
	p.printf("\n5. Deposit 20.00 EUR (inline mode: the key is stored in payments.idempotency_key), first response lost\n")
	p.proxy.loseNext(1)
	var final *reply
	for attempt := 1; final == nil; attempt++ {
		if attempt > 5 {
			return errors.New("expectation failed: the deposit did not get a response in 5 attempts")
		}
		r, err := p.c.post(ctx, p.proxy.url, "/v1/deposits", key, req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.printf("   attempt %d  POST /v1/deposits  → no response (%v); retried with the same key\n", attempt, rootCause(err))
			if err := sleep(ctx, 300*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		p.printf("   attempt %d  POST /v1/deposits  → %s\n", attempt, r)
		final = r
	}
	lost := p.proxy.lostBodies()
	p.printf("   the response of the retry: %s\n", final.body())
	p.res.DepositReplayed = final.replayed()
	rows, err := p.countRows(ctx, `SELECT count(*) FROM payments WHERE idempotency_scope = $1 AND idempotency_key = $2`, p.res.Account, key)
	if err != nil {
		return err
	}
	p.res.DepositRows = rows
	ledgerRows, err := p.countRows(ctx, `SELECT count(*) FROM idempotency_keys WHERE scope = $1 AND key = $2`, p.res.Account, key)
	if err != nil {
		return err
	}
	return errors.Join(
		p.check(final.Status == http.StatusCreated && p.res.DepositReplayed, "the retry got 201 Created with Idempotent-Replayed: true"),
		p.check(len(lost) >= 1 && bytes.Equal(lost[len(lost)-1], final.Body), "the retry's response is the lost one, byte for byte"),
		p.check(rows == 1, "%s carries the key in payments.idempotency_key (want 1)", count(rows, "payment row")),
		p.check(ledgerRows == 0, "%s for the key (want 0: inline mode writes no second row)", count(ledgerRows, "idempotency_keys row")),
	)
}
