package idemledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleDB returns a fresh database, with the ledger unless the options
// say otherwise, on the server the package's tests share (idemtest.Open:
// an Example has no *testing.T for idemtest.New), and a function that
// drops it. The command reads the service's database from DATABASE_URL
// (or -db) instead.
func exampleDB() (*idemtest.DB, func()) {
	db, err := idemtest.Open(context.Background(), "example")
	if err != nil {
		panic(err)
	}
	return db, func() { _ = db.Close() }
}

// ExampleMain_inspect runs the command's inspect on a key a charge
// recorded, as an operator would after a customer asked what their retry
// will get: the key is done, and a retry with the same request gets the
// stored receipt. With -json the answer is a list of idemledger.Key, one per table
// that holds the key; the table
// printed without it carries the same fields. A key the ledger does not
// hold is exit status 3.
func ExampleMain_inspect() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB()
	defer stop()
	ctx := context.Background()

	// The service charged order-1042 for account acct_42.
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}
	charge := &idem.Method[Receipt]{Name: "example.com/shop.Payments.Charge"}
	req := ChargeRequest{Amount: 1250, Card: "4242"}
	callCtx := idem.ContextWithScope(idem.ContextWithKey(ctx, "order-1042"), "acct_42")
	if _, err := idem.Atomic(callCtx, store, charge, fingerprintShopCharge(req), func(context.Context, pgx.Tx) (Receipt, error) {
		return Receipt{ID: 1, Amount: req.Amount, Note: "paid"}, nil
	}); err != nil {
		panic(err)
	}

	// The operator's command, with DATABASE_URL naming the service's database.
	var stdout bytes.Buffer
	opts := []idemledger.Option{
		idemledger.WithIO(os.Stdin, &stdout, os.Stdout),
		idemledger.WithGetenv(func(name string) string {
			if name == "DATABASE_URL" {
				return db.URL
			}
			return ""
		}),
	}
	code := idemledger.Main(ctx, []string{"inspect", "-json", "-scope", "acct_42", "order-1042"}, opts...)
	var keys []idemledger.Key // one per table that holds the key
	if err := json.Unmarshal(stdout.Bytes(), &keys); err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println("exit", code, "|", k.Table, k.Mode, k.Method, k.Scope, k.Key, k.Status)
		fmt.Println(k.State)
		var response bytes.Buffer
		if err := json.Compact(&response, k.Response.JSON); err != nil {
			panic(err)
		}
		fmt.Println(response.String())
	}

	code = idemledger.Main(ctx, []string{"inspect", "-scope", "acct_42", "order-9999"}, opts...)
	fmt.Println("exit", code)
	// Output:
	// exit 0 | idempotency_keys ledger example.com/shop.Payments.Charge acct_42 order-1042 done
	// done: a retry with the same request replays the stored response
	// {"id":1,"amount":1250,"note":"paid"}
	// idemledger: no key "order-9999" in scope "acct_42"
	// exit 3
}
