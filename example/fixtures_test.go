package example

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The fixtures the generated tests (idemgen_test.go) call: how to build the
// service on a test database and a valid sample request per method.

const (
	testAccount = "acct_test"
	seedCents   = 100_000_000
)

// newPaymentsForTest creates the service's own tables on db, seeds one large
// payment (id 1) and balance so that refunds and payouts can succeed many
// times, and points the service at a fake bank.
func newPaymentsForTest(t *testing.T, db *idemtest.DB) *Payments {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, ownSchema(t)); err != nil {
		t.Fatalf("create the example's tables: %v", err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO payments (account, amount_cents, currency, card_last4, description)
		VALUES ('acct_test', 100000000, 'EUR', '4242', 'seed');
		INSERT INTO balances (account, balance_cents) VALUES ('acct_test', 100000000);`)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	bank := httptest.NewServer(NewFakeBank())
	t.Cleanup(bank.Close)
	return NewPayments(db.Pool, &Bank{BaseURL: bank.URL})
}

// ownSchema returns the Up section of the example's own migration.
func ownSchema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("migrations/00001_payments.sql")
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	_, up, _ := strings.Cut(string(b), "-- +goose Up")
	up, _, _ = strings.Cut(up, "-- +goose Down")
	return up
}

func samplePaymentsChargeArgs(t *testing.T) (req ChargeRequest) {
	return ChargeRequest{
		Account: testAccount, AmountCents: 1250, Currency: "EUR",
		Card:        Card{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030},
		Description: "order 1042", Metadata: map[string]string{"order": "1042", "channel": "web"},
	}
}

func samplePaymentsRefundArgs(t *testing.T) (req RefundRequest) {
	return RefundRequest{Account: testAccount, PaymentID: 1, AmountCents: 100, Reason: "customer request"}
}

func samplePaymentsPayoutArgs(t *testing.T) (req PayoutRequest) {
	return PayoutRequest{Account: testAccount, AmountCents: 500}
}

func samplePaymentsDepositArgs(t *testing.T) (req DepositRequest) {
	return DepositRequest{Account: testAccount, AmountCents: 2000, Currency: "EUR", Description: "counter 3"}
}

// countRows counts the rows of one of the example's tables.
func countRows(t *testing.T, db *idemtest.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// The effect counters the generated tests assert besides executions: one
// charge is one payment row, one refund one refund row, one payout one
// reserved payout row.

func countPaymentsChargeEffects(t *testing.T, db *idemtest.DB) int {
	return countRows(t, db, "payments")
}

func countPaymentsRefundEffects(t *testing.T, db *idemtest.DB) int {
	return countRows(t, db, "refunds")
}

func countPaymentsPayoutEffects(t *testing.T, db *idemtest.DB) int {
	return countRows(t, db, "payouts")
}
