package example

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The fixtures the generated tests (idemgen_test.go) call: how to build the
// service on a test database and a valid sample request per method.

const (
	testAccount = "acct_test"
	seedCents   = 100_000_000
)

// newPaymentsForTest seeds one large payment (id 1) and balance on db,
// which holds the package's migrations (the generated tests apply
// migrations/ to every test database), so that refunds and payouts can
// succeed many times, and points the service at a fake bank.
func newPaymentsForTest(t *testing.T, db *idemtest.DB) *Payments {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
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

// countPaymentsDepositEffects counts deposits by what the balance was
// credited, in the sample's amounts: the keyed payments row is counted by
// the inline suite itself, so this catches a balance credited twice (or
// not at all) beside one row.
func countPaymentsDepositEffects(t *testing.T, db *idemtest.DB) int {
	t.Helper()
	var cents int64
	if err := db.Pool.QueryRow(t.Context(), "SELECT coalesce(sum(balance_cents), 0) FROM balances").Scan(&cents); err != nil {
		t.Fatalf("sum balances: %v", err)
	}
	return int(cents / samplePaymentsDepositArgs(t).AmountCents)
}
