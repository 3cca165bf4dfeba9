package idemnats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemnats"
)

// consumeCharges is docs/messaging.md's first example: the wrapper's
// Charge for every message of a durable consumer.
func consumeCharges(ctx context.Context, js jetstream.JetStream, svc *payments) (jetstream.ConsumeContext, error) {
	h := idemnats.NewHandler(svc.Charge, idemnats.Config[chargeRequest]{
		FinalErrors: []error{errDeclined}, // the method's -final-errors
	})
	cons, err := js.CreateOrUpdateConsumer(ctx, "PAYMENTS", jetstream.ConsumerConfig{
		Durable:   "charges", // durable: the default scope holds its name
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   30 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return cons.Consume(h.Func(ctx))
}

// byEventID is docs/messaging.md's handler that reads the request's event
// identifier itself (the field a wrapper generated with -key=req.EventID
// reads), so that a request without one is keyed by its message ID.
func byEventID(svc *payments) *idemnats.Handler[chargeRequest, receipt] {
	h := idemnats.NewHandler(svc.Charge, idemnats.Config[chargeRequest]{
		RequestKey: func(r chargeRequest) string { return r.EventID },
	})
	return h
}

// The documented consumer charges once per event, a declined card
// included, and leaves nothing pending.
func TestConsumeCharges(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Minute)
	cc, err := consumeCharges(t.Context(), b.js, p)
	require.NoError(t, err)
	defer cc.Stop()
	b.publish(t, chargeRequest{EventID: "evt-1", Account: "acct", Amount: 100}, "evt-1")
	b.publish(t, chargeRequest{EventID: "evt-2", Account: "acct", Amount: -1}, "evt-2") // declined: final, acked
	b.publish(t, chargeRequest{EventID: "evt-3", Account: "acct", Amount: 300}, "evt-3")
	b.settled(t)
	assert.Equal(t, 2, p.effects(t))
}
