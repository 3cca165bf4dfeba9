package grpcapi

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The fixtures the generated tests (idem_gen_test.go) call. Every test
// database holds the example's migrations (-migrations=../migrations).

// newPaymentsForTest seeds one large payment (id 1) and balance of one
// account, which every call of the generated tests acts for whatever its
// scope, so that every sample succeeds many times, and points the service
// at a fake bank.
func newPaymentsForTest(t *testing.T, db *idemtest.DB) *Payments {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO payments (account, amount_cents, currency, card_last4, description) VALUES ('acct_test', 100000000, 'EUR', '4242', 'seed');
		INSERT INTO balances (account, balance_cents) VALUES ('acct_test', 100000000);`); err != nil {
		t.Fatalf("seed: %v", err)
	}
	bank := httptest.NewServer(example.NewFakeBank())
	t.Cleanup(bank.Close)
	p := NewPayments(example.NewPayments(db.Pool, &example.Bank{BaseURL: bank.URL}))
	p.account = func(context.Context) string { return "acct_test" }
	return p
}

func samplePaymentsChargeArgs(t *testing.T) (req *paymentsv1.ChargeRequest) {
	return &paymentsv1.ChargeRequest{
		AmountCents: 1250, Currency: "EUR",
		Card:        &paymentsv1.Card{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030},
		Description: "order 1042", Metadata: map[string]string{"order": "1042", "channel": "web"},
	}
}

func samplePaymentsRefundArgs(t *testing.T) (req *paymentsv1.RefundRequest) {
	return &paymentsv1.RefundRequest{PaymentId: 1, AmountCents: 100, Reason: "customer request"}
}

func samplePaymentsPayoutArgs(t *testing.T) (req *paymentsv1.PayoutRequest) {
	return &paymentsv1.PayoutRequest{AmountCents: 500}
}
