package scenario_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/example/cmd/demo/scenario"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestDemo runs the scenario of the demo command against a fresh
// database (the goose migrations included) and checks its counts, then
// counts the rows again itself.
func TestDemo(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	var out bytes.Buffer
	res, err := scenario.Run(t.Context(), &out, db.URL, scenario.Options{})
	t.Log("demo output:\n" + out.String())
	require.NoError(t, err)

	// Step 1: the first response is lost, the retry replays it.
	assert.Equal(t, 2, res.ChargeAttempts, "charge attempts")
	assert.Equal(t, 1, res.LostResponses, "lost responses")
	assert.True(t, res.ChargeReplayed, "the retry carries Idempotent-Replayed: true")
	assert.True(t, res.BodiesIdentical, "the retry's body is the lost one")
	assert.Equal(t, 1, res.Payments, "payments")
	assert.Equal(t, 2, res.LedgerEntries, "ledger entries of the payment")
	assert.Equal(t, 1, res.ChargeKeyRows, "idempotency_keys rows of the charge's key")
	// Step 2: the reused key with another amount.
	assert.Equal(t, 422, res.MismatchStatus)
	// Step 3: the twin of a slow payout.
	assert.Equal(t, 409, res.TwinStatus)
	assert.NotEmpty(t, res.TwinRetryAfter, "Retry-After")
	assert.Equal(t, 201, res.PayoutStatus)
	assert.True(t, res.PayoutReplayed, "the twin's retry replays the payout")
	assert.Equal(t, 1, res.BankCalls, "transfer requests at the bank")
	assert.Equal(t, 1, res.BankTransfers, "transfers at the bank")
	assert.Equal(t, 1, res.Payouts, "payouts")
	// Step 4: the declined card.
	assert.Equal(t, 402, res.DeclineStatus)
	assert.Equal(t, 402, res.DeclineRetryStatus)
	assert.True(t, res.DeclineReplayed, "the decline is replayed")
	// Step 5: the inline-mode deposit.
	assert.True(t, res.DepositReplayed, "the deposit's retry replays its row")
	assert.Equal(t, 1, res.DepositRows, "payments rows carrying the deposit's key")
	assert.Equal(t, 24, res.Checks, "checks that held")

	// The database, counted independently of the scenario.
	count := func(query string) int {
		t.Helper()
		var n int
		require.NoError(t, db.Pool.QueryRow(t.Context(), query).Scan(&n), query)
		return n
	}
	assert.Equal(t, 2, count(`SELECT count(*) FROM payments`), "payments: the charge and the deposit")
	assert.Equal(t, 1, count(`SELECT count(*) FROM payments WHERE idempotency_key IS NOT NULL`), "payments carrying an inline key")
	assert.Equal(t, 2, count(`SELECT count(*) FROM ledger_entries`), "ledger entries")
	assert.Equal(t, 1, count(`SELECT count(*) FROM payouts WHERE status = 'paid'`), "paid payouts")
	assert.Equal(t, 2, count(`SELECT count(*) FROM idempotency_keys WHERE method = 'github.com/idemgen/idemgen/example.Payments.Charge' AND status = 'done'`),
		"charge keys: the successful charge and the stored decline")
	assert.Equal(t, 1, count(`SELECT count(*) FROM idempotency_keys WHERE method = 'github.com/idemgen/idemgen/example.Payments.Payout' AND status = 'done'`), "payout keys")
	// Step 6: the outbox.
	assert.Equal(t, 1, count(`SELECT count(*) FROM orders`), "orders")
	assert.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'receipt_email' AND state = 'completed'`), "completed email jobs")
	assert.Equal(t, 1, count(`SELECT count(*) FROM idempotency_keys WHERE method = 'github.com/idemgen/idemgen/example/outbox.Shop.Charge' AND status = 'done'`), "outbox charge keys")
	assert.Equal(t, 1, count(`SELECT count(*) FROM idempotency_keys WHERE method = 'github.com/idemgen/idemgen/example/outbox.Mailer.SendReceipt' AND status = 'done'`), "email keys")
	assert.Equal(t, 5, count(`SELECT count(*) FROM idempotency_keys`), "ledger rows")
	files, err := filepath.Glob("../../../migrations/*.sql")
	require.NoError(t, err)
	assert.Equal(t, len(files), count(`SELECT count(*) FROM goose_db_version WHERE version_id > 0`), "goose migrations applied")
}
