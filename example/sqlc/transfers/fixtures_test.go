package transfers

import (
	"testing"

	"github.com/idemgen/idemgen/example/sqlc/transfers/db"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The fixtures the generated tests (idem_gen_test.go) call: how to build the
// service on a test database and a valid sample request.

// Seeded accounts: alice pays bob in the sample request; each holds enough
// for every transfer the tests make.
const (
	alice     = 1
	bob       = 2
	seedCents = 1_000_000_000
)

// newTransfersForTest seeds alice's and bob's accounts (ids 1 and 2) on tdb, which holds the
// package's migrations (the generated tests apply migrations/ to every test
// database), and returns the service over the database's *sql.DB.
func newTransfersForTest(t *testing.T, tdb *idemtest.DB) *Transfers {
	t.Helper()
	svc := NewTransfers(tdb.SQL)
	for _, owner := range []string{"alice", "bob"} {
		_, err := svc.queries.CreateAccount(t.Context(), db.CreateAccountParams{Owner: owner, Currency: "EUR", BalanceCents: seedCents})
		if err != nil {
			t.Fatalf("seed %s's account: %v", owner, err)
		}
	}
	return svc
}

func sampleTransfersTransferArgs(t *testing.T) (req TransferRequest) {
	return TransferRequest{FromAccount: alice, ToAccount: bob, AmountCents: 1250, Currency: "EUR", Memo: "rent, December"}
}

// countTransfersTransferEffects counts transfers rows: one transfer is one
// row.
func countTransfersTransferEffects(t *testing.T, tdb *idemtest.DB) int {
	t.Helper()
	n, err := NewTransfers(tdb.SQL).queries.CountTransfers(t.Context())
	if err != nil {
		t.Fatalf("count transfers: %v", err)
	}
	return int(n)
}

// otherTransfersTransferArgs is a second valid request, for the tests that
// reuse a key with another request: bob pays alice back.
func otherTransfersTransferArgs(t *testing.T) (req TransferRequest) {
	return TransferRequest{FromAccount: bob, ToAccount: alice, AmountCents: 700, Currency: "EUR", Memo: "half the rent back"}
}
