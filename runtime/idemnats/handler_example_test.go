package idemnats_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemnats"
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

// exampleJetStream starts a NATS server with JetStream in this process, on
// loopback, and returns a connection to it and a function that stops it. A
// service connects to its own servers instead.
func exampleJetStream() (jetstream.JetStream, func()) {
	dir, err := os.MkdirTemp("", "idemnats-example-")
	if err != nil {
		panic(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		panic("the NATS server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	return js, func() {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}

// ExampleNewHandler consumes charge events through a wrapper keyed by the
// event's ID (a wrapper generated with -key=req.EventID). The producer
// published one event twice, under two message IDs (it retried a publish
// whose acknowledgement it missed), so JetStream holds two messages: both are
// acked, the second answered from the ledger, and one charge commits. (The
// second message is a first delivery, which nothing marks as a retry, so its
// body runs once more and is rolled back; a redelivery of a message is
// looked up first and does not run the body.)
func ExampleNewHandler() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stopDB := exampleDB(`CREATE TABLE charges (id bigserial PRIMARY KEY, event text NOT NULL, amount bigint NOT NULL)`)
	defer stopDB()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}
	js, stopNATS := exampleJetStream()
	defer stopNATS()

	// The wrapper's method, as idemgen generates it for
	// Charge(ctx, tx, ChargeEvent) (int64, error) with -key=req.EventID.
	type ChargeEvent struct {
		EventID string `json:"event_id"`
		Amount  int64  `json:"amount"`
	}
	chargeMethod := &idem.Method[int64]{Name: "Payments.Charge"}
	var runs atomic.Int64
	charge := func(ctx context.Context, req ChargeEvent) (int64, error) {
		ctx = idem.ContextWithDefaultKey(ctx, req.EventID)
		f := idem.NewFingerprinter(chargeMethod.Name)
		f.Field("EventID")
		f.String(req.EventID)
		f.Field("Amount")
		f.Int(req.Amount)
		return idem.Atomic(ctx, store, chargeMethod, f.Sum(), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			runs.Add(1)
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO charges (event, amount) VALUES ($1, $2) RETURNING id`, req.EventID, req.Amount).Scan(&id)
			return id, err
		})
	}

	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PAYMENTS", Subjects: []string{"payments.>"}}); err != nil {
		panic(err)
	}
	event := []byte(`{"event_id":"evt-1","amount":1250}`)
	for _, msgID := range []string{"publish-1", "publish-2"} {
		if _, err := js.Publish(ctx, "payments.charge", event, jetstream.WithMsgID(msgID)); err != nil {
			panic(err)
		}
	}

	settled := make(chan idemnats.Result, 2)
	h := idemnats.NewHandler(charge, idemnats.Config[ChargeEvent]{
		OnSettle: func(_ context.Context, _ jetstream.Msg, r idemnats.Result) { settled <- r },
	})
	cons, err := js.CreateOrUpdateConsumer(ctx, "PAYMENTS", jetstream.ConsumerConfig{
		Durable:   "charges", // durable: the default scope holds its name
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   30 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	cc, err := cons.Consume(h.Func(ctx))
	if err != nil {
		panic(err)
	}
	defer cc.Stop()

	for range 2 {
		r := <-settled
		fmt.Println(r.Action, "key:", r.Source, r.Key, "scope:", r.Scope, "replayed:", r.Replayed, "err:", r.Err)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&rows); err != nil {
		panic(err)
	}
	fmt.Println("body runs:", runs.Load(), "charge rows:", rows)
	// Output:
	// Ack key: FromRequest evt-1 scope: PAYMENTS/charges replayed: false err: <nil>
	// Ack key: FromRequest evt-1 scope: PAYMENTS/charges replayed: true err: <nil>
	// body runs: 2 charge rows: 1
}
