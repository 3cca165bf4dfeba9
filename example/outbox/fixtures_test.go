package outbox

import (
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The fixtures the generated tests call.

// newShopForTest migrates River's tables into db and enqueues through an
// insert-only client.
func newShopForTest(t *testing.T, db *idemtest.DB) *Shop {
	t.Helper()
	m, err := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
	if err != nil {
		t.Fatalf("rivermigrate: %v", err)
	}
	if _, err := m.Migrate(t.Context(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("migrate River: %v", err)
	}
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	if err != nil {
		t.Fatalf("River client: %v", err)
	}
	return NewShop(client)
}

func sampleShopChargeArgs(t *testing.T) (req ChargeRequest) {
	return ChargeRequest{Customer: "cus_1", Email: "ada@example.com", AmountCents: 4200}
}

func newMailerForTest(t *testing.T, db *idemtest.DB) *Mailer { return NewMailer(NewFakeProvider()) }

func sampleMailerSendReceiptArgs(t *testing.T) (email ReceiptEmail) {
	return ReceiptEmail{EmailID: "receipt-1", OrderID: 1, To: "ada@example.com", AmountCents: 4200}
}

// countShopChargeEffects counts the receipt emails enqueued: one per
// charge, never one per attempt.
func countShopChargeEffects(t *testing.T, db *idemtest.DB) int {
	var n int
	if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'receipt_email'`).Scan(&n); err != nil {
		t.Fatalf("count email jobs: %v", err)
	}
	return n
}
