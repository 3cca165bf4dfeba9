package idemnats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// The tests run a small payments service through a hand-written wrapper
// shaped like a generated one (the tests live in a module of their own,
// without the generator): Charge is atomic and keyed from the context or,
// when it carries none, from its EventID field, as a wrapper generated with
// -key=req.EventID is; ChargeByDelivery is Charge generated without -key;
// Payout is external, with -key, and blocks until released.

// errDeclined is Charge's final error.
var errDeclined = errors.New("card declined")

var (
	chargeMethod = &idem.Method[receipt]{Name: "idemnats.test.Charge",
		FinalErrors: []idem.FinalError{{Name: "errDeclined", Err: errDeclined}}}
	payoutMethod = &idem.Method[receipt]{Name: "idemnats.test.Payout", LockTimeout: time.Minute}
)

// chargeRequest is the message's data: EventID is the business event's
// identifier, the same however many times the event is published.
type chargeRequest struct {
	EventID string `json:"event_id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type receipt struct {
	PaymentID int64 `json:"payment_id"`
}

func fingerprint(method string, req chargeRequest) []byte {
	f := idem.NewFingerprinter(method)
	f.Field("EventID")
	f.String(req.EventID)
	f.Field("Account")
	f.String(req.Account)
	f.Field("Amount")
	f.Int(req.Amount)
	return f.Sum()
}

// payments is the service, wrapped: every Charge that runs writes one row
// of payments, its effect.
type payments struct {
	db      *idemtest.DB
	store   *idem.Store
	started chan struct{}
	release chan struct{}
	runs    atomic.Int64 // Charge's bodies run
}

func newPayments(t *testing.T) *payments {
	t.Helper()
	db := idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY, event text NOT NULL, amount bigint NOT NULL)`))
	store, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	return &payments{db: db, store: store, started: make(chan struct{}, 1), release: make(chan struct{})}
}

// withFieldKey is the line a wrapper generated with -key=req.EventID
// starts with: the key from the context, or when it carries none, from the
// field.
func withFieldKey(ctx context.Context, req chargeRequest) context.Context {
	return idem.ContextWithDefaultKey(ctx, req.EventID)
}

// Charge is the wrapper's atomic method, generated with -key=req.EventID.
func (p *payments) Charge(ctx context.Context, req chargeRequest) (receipt, error) {
	return p.ChargeByDelivery(withFieldKey(ctx, req), req)
}

// ChargeByDelivery is Charge in a wrapper generated without -key: keyed by
// the context alone.
func (p *payments) ChargeByDelivery(ctx context.Context, req chargeRequest) (receipt, error) {
	return idem.Atomic(ctx, p.store, chargeMethod, fingerprint(chargeMethod.Name, req), func(ctx context.Context, tx pgx.Tx) (receipt, error) {
		p.runs.Add(1)
		if req.Amount < 0 {
			return receipt{}, fmt.Errorf("charge %d: %w", req.Amount, errDeclined)
		}
		var r receipt
		err := tx.QueryRow(ctx, `INSERT INTO payments (event, amount) VALUES ($1, $2) RETURNING id`, req.EventID, req.Amount).Scan(&r.PaymentID)
		return r, err
	})
}

// Payout is the wrapper's external method: it blocks until released.
func (p *payments) Payout(ctx context.Context, req chargeRequest) (receipt, error) {
	return idem.External(withFieldKey(ctx, req), p.store, payoutMethod, fingerprint(payoutMethod.Name, req), func(ctx context.Context) (receipt, error) {
		p.started <- struct{}{}
		select {
		case <-p.release:
			return receipt{PaymentID: 99}, nil
		case <-ctx.Done():
			return receipt{}, ctx.Err()
		}
	})
}

func (p *payments) effects(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, p.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

// broker is a real NATS server with JetStream, run in this process on
// loopback, its store in a temporary directory, with one stream and one
// durable pull consumer.
type broker struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

const (
	streamName   = "PAYMENTS"
	consumerName = "charges"
	subject      = "payments.charge"
)

// newBroker starts the server and makes the stream and a consumer whose
// unacknowledged messages are delivered again after ackWait.
func newBroker(t *testing.T, ackWait time.Duration) *broker {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	require.True(t, srv.ReadyForConnections(30*time.Second), "the NATS server did not start")
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := t.Context()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"payments.>"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	require.NoError(t, err)
	return &broker{srv: srv, nc: nc, js: js, cons: cons}
}

// publish publishes req, with the message ID id unless it is "".
func (b *broker) publish(t *testing.T, req any, id string) uint64 {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	return b.publishRaw(t, data, id)
}

func (b *broker) publishRaw(t *testing.T, data []byte, id string) uint64 {
	t.Helper()
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := b.js.Publish(t.Context(), subject, data, opts...)
	require.NoError(t, err)
	return ack.Sequence
}

// next fetches the next delivery, waiting for it as long as it takes (a
// redelivery comes after AckWait).
func (b *broker) next(t *testing.T) jetstream.Msg {
	t.Helper()
	for range 60 {
		batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			return m
		}
		require.NoError(t, batch.Error())
	}
	t.Fatal("no message was delivered within a minute")
	return nil
}

// settled waits until the server holds no message of the consumer that is
// undelivered, or delivered and neither acknowledged nor terminated, and its
// ack floor has reached the stream's last message (the server processes
// acks asynchronously).
func (b *broker) settled(t *testing.T) {
	t.Helper()
	stream, err := b.js.Stream(t.Context(), streamName)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		si, err := stream.Info(t.Context())
		if err != nil {
			return false
		}
		// Every message the stream holds acknowledged (or terminated), not
		// only none pending: right after a publish the consumer may not
		// count the new message yet.
		info, err := b.cons.Info(t.Context())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream >= si.State.LastSeq
	}, time.Minute, 10*time.Millisecond, "messages are still pending")
}

// lostAck is a delivery whose Ack never reaches the server, as when the
// connection drops right after the call committed.
type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }
