package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleDB returns a fresh database, with the ledger unless the options
// say otherwise, on the server the package's tests share (idemtest.Open:
// an Example has no *testing.T for idemtest.New), and a function that
// drops it. A service passes its own *pgxpool.Pool to idem.NewStore
// instead.
func exampleDB(opts ...idemtest.Option) (*idemtest.DB, func()) {
	db, err := idemtest.Open(context.Background(), "example", opts...)
	if err != nil {
		panic(err)
	}
	return db, func() { _ = db.Close() }
}

// exampleCount returns the number of rows of table.
func exampleCount(db *idemtest.DB, table string) int {
	var n int
	if err := db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		panic(err)
	}
	return n
}

// ExampleAtomic charges once per key: the charge row and the ledger row
// commit in one transaction. A retry marked as one (the adapters mark a
// redelivery or a client's retry) is answered from the ledger without
// running the body; an unmarked retry runs the body, which is rolled back,
// and gets the same answer. A key reused with another request is refused.
func ExampleAtomic() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB(idemtest.WithSetup(`CREATE TABLE charges (id bigserial PRIMARY KEY, amount bigint NOT NULL)`))
	defer stop()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}

	// What idemgen generates for a method Charge(ctx, tx, amount) (int64, error).
	chargeMethod := &idem.Method[int64]{Name: "Payments.Charge"}
	runs := 0
	charge := func(ctx context.Context, amount int64) (int64, error) {
		f := idem.NewFingerprinter(chargeMethod.Name)
		f.Field("amount")
		f.Int(amount)
		return idem.Atomic(ctx, store, chargeMethod, f.Sum(), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			runs++
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES ($1) RETURNING id`, amount).Scan(&id)
			return id, err
		})
	}

	// The key and the tenant's scope travel in the context.
	ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "order-1042"), "acct_42")

	id, err := charge(ctx, 1250)
	fmt.Println("first:", id, err, "body runs:", runs)

	retry, outcome := idem.ContextWithOutcome(idem.ContextWithRetry(ctx))
	id, err = charge(retry, 1250)
	fmt.Println("marked retry:", id, err, "replayed:", outcome.Replayed(), "body runs:", runs)

	unmarked, outcome := idem.ContextWithOutcome(ctx)
	id, err = charge(unmarked, 1250)
	fmt.Println("unmarked retry:", id, err, "replayed:", outcome.Replayed(), "body runs:", runs)

	_, err = charge(idem.ContextWithRetry(ctx), 9900)
	fmt.Println("same key, other amount:", errors.Is(err, idem.ErrMismatch))

	fmt.Println("charge rows:", exampleCount(db, "charges"))
	// Output:
	// first: 1 <nil> body runs: 1
	// marked retry: 1 <nil> replayed: true body runs: 1
	// unmarked retry: 1 <nil> replayed: true body runs: 2
	// same key, other amount: true
	// charge rows: 1
}

// ExampleExternal pays through a provider outside the database. Step
// records the provider's answer on the key's ledger row, so the retry after
// a failure later in the body (the receipt's mail server was down) does not
// charge the card again; the retry after success replays the stored
// response without running the body.
func ExampleExternal() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB()
	defer stop()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}

	// A pretend payment provider and mail server, counting their calls.
	charges, mails := 0, 0
	chargeCard := func(ctx context.Context, amount int64) (string, error) {
		charges++
		return fmt.Sprintf("ch_%d", charges), nil
	}
	sendReceipt := func(ctx context.Context, charge string) error {
		mails++
		if mails == 1 {
			return errors.New("mail server unavailable")
		}
		return nil
	}

	payMethod := &idem.Method[string]{Name: "Payments.Pay"}
	runs := 0
	pay := func(ctx context.Context, amount int64) (string, error) {
		f := idem.NewFingerprinter(payMethod.Name)
		f.Field("amount")
		f.Int(amount)
		return idem.External(ctx, store, payMethod, f.Sum(), func(ctx context.Context) (string, error) {
			runs++
			charge, err := idem.Step(ctx, "charge card", func(ctx context.Context) (string, error) {
				return chargeCard(ctx, amount) // pass idem.DownstreamKey(ctx, "charge card") if the provider takes keys
			})
			if err != nil {
				return "", err
			}
			if err := sendReceipt(ctx, charge); err != nil {
				return "", fmt.Errorf("send receipt: %w", err) // not final: the key is released for a retry
			}
			return charge, nil
		})
	}

	ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "invoice-7"), "acct_42")
	for range 3 {
		charge, err := pay(ctx, 1250)
		fmt.Printf("%q %v | body runs %d, card charges %d, mails %d\n", charge, err, runs, charges, mails)
	}
	// Output:
	// "" send receipt: mail server unavailable | body runs 1, card charges 1, mails 1
	// "ch_1" <nil> | body runs 2, card charges 1, mails 2
	// "ch_1" <nil> | body runs 2, card charges 1, mails 2
}

// ExampleInline keeps the key in the business row: the body writes
// idem.InlineKeyFrom(ctx) into the order it inserts, and that INSERT is the
// claim. A retry's INSERT meets the unique index on the key; its
// transaction rolls back and the lookup reads the first order back.
func ExampleInline() {
	orders, err := ledger.NewInline("orders") // the inline columns and index idemgen's migration adds
	if err != nil {
		panic(err)
	}
	// A throwaway database (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB(idemtest.WithoutLedger(), idemtest.WithSetup(append([]string{
		`CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL)`,
	}, orders.DDL()...)...))
	defer stop()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}

	type Order struct {
		ID   int64
		Item string
	}
	orderMethod := &idem.InlineMethod[Order]{Name: "Shop.CreateOrder", Table: "orders"}
	// orderByKey is the lookup: the order stored under the key, with the
	// fingerprint written with it.
	orderByKey := func(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (Order, []byte, error) {
		var o Order
		var fp []byte
		err := tx.QueryRow(ctx, `SELECT id, item, idempotency_fingerprint FROM orders
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&o.ID, &o.Item, &fp)
		return o, fp, err
	}
	createOrder := func(ctx context.Context, item string) (Order, error) {
		f := idem.NewFingerprinter(orderMethod.Name)
		f.Field("item")
		f.String(item)
		return idem.Inline(ctx, store, orderMethod, f.Sum(), orderByKey, func(ctx context.Context, tx pgx.Tx) (Order, error) {
			k, _ := idem.InlineKeyFrom(ctx)
			o := Order{Item: item}
			err := tx.QueryRow(ctx, `INSERT INTO orders (item, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4) RETURNING id`, item, k.Scope, k.Key, k.Fingerprint).Scan(&o.ID)
			return o, err
		})
	}

	ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "cart-31"), "acct_42")
	for range 2 {
		ctx, outcome := idem.ContextWithOutcome(ctx)
		o, err := createOrder(ctx, "espresso machine")
		fmt.Printf("%+v %v replayed: %v\n", o, err, outcome.Replayed())
	}
	_, err = createOrder(ctx, "grinder")
	fmt.Println("same key, other item:", errors.Is(err, idem.ErrMismatch))
	fmt.Println("order rows:", exampleCount(db, "orders"))
	// Output:
	// {ID:1 Item:espresso machine} <nil> replayed: false
	// {ID:1 Item:espresso machine} <nil> replayed: true
	// same key, other item: true
	// order rows: 1
}
