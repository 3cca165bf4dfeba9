package example

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Bank is the HTTP client of the bank that executes payouts. The bank takes
// its own Idempotency-Key, so a payout re-run after a takeover is
// deduplicated there too.
type Bank struct {
	BaseURL string       // e.g. http://127.0.0.1:8081
	HTTP    *http.Client // nil means http.DefaultClient
}

// Transfer asks the bank to send amount to account and returns the bank's
// reference.
func (b *Bank) Transfer(ctx context.Context, key, account string, amountCents int64) (string, error) {
	body, err := json.Marshal(map[string]any{"account": account, "amount_cents": amountCents})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.BaseURL+"/transfers", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("bank: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	c := b.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("bank: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", fmt.Errorf("bank: read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bank: transfer refused: %s", resp.Status)
	}
	var out struct {
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Ref == "" {
		return "", fmt.Errorf("bank: malformed response %q", raw)
	}
	return out.Ref, nil
}

// PayoutRequest asks to send money from a merchant's balance to its bank.
type PayoutRequest struct {
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
}

// PayoutReceipt is the result of a payout.
type PayoutReceipt struct {
	PayoutID     int64  `json:"payout_id"`
	Account      string `json:"account"`
	AmountCents  int64  `json:"amount_cents"`
	BankRef      string `json:"bank_ref"`
	BalanceCents int64  `json:"balance_cents"`
}

type reservation struct {
	PayoutID     int64 `json:"payout_id"`
	BalanceCents int64 `json:"balance_cents"`
}

// Payout sends money from the merchant's balance to its bank account. The
// bank is outside the database, so it runs in external mode, in three
// recorded steps: reserve the money, transfer it, mark the payout paid. After
// a crash, a retry that takes the key over skips the steps already done.
//
//go:generate go tool idemgen -retention=48h -lock-timeout=30s -final-errors=ErrInsufficientFunds
func (p *Payments) Payout(ctx context.Context, req PayoutRequest) (PayoutReceipt, error) {
	if req.AmountCents <= 0 || req.Account == "" {
		return PayoutReceipt{}, fmt.Errorf("%w: account and a positive amount_cents are required", ErrInvalidRequest)
	}
	res, err := idem.Step(ctx, "reserve", func(ctx context.Context) (reservation, error) {
		return p.reserve(ctx, idem.DownstreamKey(ctx, "reserve"), req)
	})
	if err != nil {
		return PayoutReceipt{}, err
	}
	ref, err := idem.Step(ctx, "transfer", func(ctx context.Context) (string, error) {
		return p.bank.Transfer(ctx, idem.DownstreamKey(ctx, "transfer"), req.Account, req.AmountCents)
	})
	if err != nil {
		return PayoutReceipt{}, err
	}
	if _, err := p.db.Exec(ctx, `UPDATE payouts SET status = 'paid', bank_ref = $2 WHERE id = $1 AND account = $3`, res.PayoutID, ref, req.Account); err != nil {
		return PayoutReceipt{}, fmt.Errorf("mark payout paid: %w", err)
	}
	return PayoutReceipt{PayoutID: res.PayoutID, Account: req.Account, AmountCents: req.AmountCents,
		BankRef: ref, BalanceCents: res.BalanceCents}, nil
}

// reserve debits the balance and records a pending payout in one
// transaction. The payout row is keyed by reserveKey, so running it twice
// (a crash after commit, before the step was recorded) reserves once.
func (p *Payments) reserve(ctx context.Context, reserveKey string, req PayoutRequest) (reservation, error) {
	var r reservation
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error { //idem:effect-ok the payout row is keyed by reserveKey: a second run finds it and reserves once
		err := tx.QueryRow(ctx, `SELECT id FROM payouts WHERE reserve_key = $1 AND account = $2`, reserveKey, req.Account).Scan(&r.PayoutID)
		if err == nil {
			return tx.QueryRow(ctx, `SELECT balance_cents FROM balances WHERE account = $1`, req.Account).Scan(&r.BalanceCents)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		err = tx.QueryRow(ctx, `UPDATE balances SET balance_cents = balance_cents - $2
			WHERE account = $1 AND balance_cents >= $2 RETURNING balance_cents`, req.Account, req.AmountCents).Scan(&r.BalanceCents)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("payout %d from %s: %w", req.AmountCents, req.Account, ErrInsufficientFunds)
		}
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO payouts (reserve_key, account, amount_cents) VALUES ($1, $2, $3) RETURNING id`,
			reserveKey, req.Account, req.AmountCents).Scan(&r.PayoutID)
	})
	if err != nil && !errors.Is(err, ErrInsufficientFunds) {
		err = fmt.Errorf("reserve payout: %w", err)
	}
	return r, err
}
