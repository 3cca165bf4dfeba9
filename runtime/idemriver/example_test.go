package idemriver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemriver"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleDB returns a fresh database, with the ledger unless the options
// say otherwise, on the server the package's tests share (idemtest.Open:
// an Example has no *testing.T for idemtest.New), and a function that
// drops it. A service passes its own *pgxpool.Pool to idem.NewStore
// instead.
func exampleDB(setup ...string) (*idemtest.DB, func()) {
	db, err := idemtest.Open(context.Background(), "example", idemtest.WithSetup(setup...))
	if err != nil {
		panic(err)
	}
	return db, func() { _ = db.Close() }
}

// ChargeArgs is a River job that charges an order.
type ChargeArgs struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}

// Kind is the job's kind, and by default (idemriver.KindScope) the scope of
// its keys.
func (ChargeArgs) Kind() string { return "charge" }

// ExampleAtomic works charge jobs through an atomic wrapper keyed by the
// order (a wrapper generated with -key=req.OrderID). The producer inserted
// one charge as two jobs (it retried an insert it thought had failed): both
// jobs complete, each in the transaction of its call, and the second is
// answered from the ledger, so one charge commits.
func ExampleAtomic() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB(`CREATE TABLE charges (id bigserial PRIMARY KEY, order_id text NOT NULL, amount bigint NOT NULL)`)
	defer stop()
	ctx := context.Background()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}
	driver := riverpgxv5.New(db.Pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		panic(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		panic(err)
	}

	// What a generated ChargeInTx does with -key=req.OrderID: the key is
	// the order unless the context carries one.
	chargeMethod := &idem.Method[int64]{Name: "Payments.Charge"}
	chargeInTx := func(ctx context.Context, tx pgx.Tx, req ChargeArgs) (int64, error) {
		ctx = idem.ContextWithDefaultKey(ctx, req.OrderID)
		f := idem.NewFingerprinter(chargeMethod.Name)
		f.Field("OrderID")
		f.String(req.OrderID)
		f.Field("Amount")
		f.Int(req.Amount)
		return idem.AtomicInTx(ctx, store, tx, chargeMethod, f.Sum(), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO charges (order_id, amount) VALUES ($1, $2) RETURNING id`, req.OrderID, req.Amount).Scan(&id)
			return id, err
		})
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.Atomic(db.Pool, idemriver.Config[ChargeArgs]{},
		func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
			_, err := chargeInTx(ctx, tx, job.Args)
			return err
		}))
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	completed, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = client.Stop(ctx) }()

	for range 2 {
		if _, err := client.Insert(ctx, ChargeArgs{OrderID: "order-1042", Amount: 1250}, nil); err != nil {
			panic(err)
		}
	}
	for range 2 {
		ev := <-completed
		fmt.Println(ev.Job.Kind, ev.Job.State)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&rows); err != nil {
		panic(err)
	}
	fmt.Println("charge rows:", rows)
	// Output:
	// charge completed
	// charge completed
	// charge rows: 1
}
