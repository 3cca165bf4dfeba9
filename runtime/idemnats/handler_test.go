package idemnats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemnats"
)

// byRequest takes the key from the request's EventID first.
var byRequest = []idemnats.KeySource{idemnats.FromRequest, idemnats.FromMsgID, idemnats.FromSequence}

func eventID(r chargeRequest) string { return r.EventID }

// A delivery whose ack is lost after its call committed is delivered again
// after AckWait, with the same key: the wrapper replays, the method does
// not run again, and the message is acked. With the default Config a
// wrapper with -key is keyed by its field, one without by the message ID,
// else by the stream sequence.
func TestAckLostReplays(t *testing.T) {
	for _, c := range []struct {
		name, msgID, key string
		requestKey       bool
		source           idemnats.KeySource
	}{
		{"request field", "msg-1", "evt-1", true, idemnats.FromRequest},
		{"msg id", "msg-1", "msg-1", false, idemnats.FromMsgID},
		{"stream sequence", "", "nats-seq:PAYMENTS:1", false, idemnats.FromSequence},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, b := newPayments(t), newBroker(t, time.Second)
			call := p.ChargeByDelivery
			if c.requestKey {
				call = p.Charge
			}
			h := idemnats.NewHandler(call, idemnats.Config[chargeRequest]{})
			b.publish(t, chargeRequest{EventID: "evt-1", Account: "acct", Amount: 500}, c.msgID)

			first := h.Handle(t.Context(), lostAck{b.next(t)})
			require.NoError(t, first.Err)
			assert.Equal(t, idemnats.Ack, first.Action)
			assert.False(t, first.Replayed)
			assert.Equal(t, c.source, first.Source)
			assert.Equal(t, c.key, first.Key)
			assert.Equal(t, "PAYMENTS/charges", first.Scope)

			again := b.next(t) // delivered again: the server never got the ack
			md, err := again.Metadata()
			require.NoError(t, err)
			require.EqualValues(t, 2, md.NumDelivered)
			second := h.Handle(t.Context(), again)
			require.NoError(t, second.Err)
			assert.Equal(t, idemnats.Ack, second.Action)
			assert.True(t, second.Replayed, "the redelivery ran the method again")
			assert.Equal(t, c.source, second.Source)
			assert.Equal(t, c.key, second.Key)
			assert.Equal(t, 1, p.effects(t))
			assert.EqualValues(t, 1, p.runs.Load(), "the redelivery looked its key up before its body")
			b.settled(t)
		})
	}
}

// One business event published twice under two message IDs: a key from
// the request's field dedupes it, with the default Config for a wrapper
// generated with -key; a key from the message ID cannot (each publication
// is a new message to it).
func TestSameEventTwoMessageIDs(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler func(*payments) *idemnats.Handler[chargeRequest, receipt]
		effects int
	}{
		{"default config, wrapper with -key", func(p *payments) *idemnats.Handler[chargeRequest, receipt] {
			return idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{})
		}, 1},
		{"request field first, read by the handler", byEventID, 1},
		{"msg id first (Keys)", func(p *payments) *idemnats.Handler[chargeRequest, receipt] {
			return idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{
				Keys: []idemnats.KeySource{idemnats.FromMsgID, idemnats.FromRequest, idemnats.FromSequence}})
		}, 2},
		{"default config, wrapper without -key", func(p *payments) *idemnats.Handler[chargeRequest, receipt] {
			return idemnats.NewHandler(p.ChargeByDelivery, idemnats.Config[chargeRequest]{})
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, b := newPayments(t), newBroker(t, time.Minute)
			h := c.handler(p)
			req := chargeRequest{EventID: "evt-7", Account: "acct", Amount: 700}
			b.publish(t, req, "publish-1")
			b.publish(t, req, "publish-2")
			var replays int
			for range 2 {
				r := h.Handle(t.Context(), b.next(t))
				require.NoError(t, r.Err)
				require.Equal(t, idemnats.Ack, r.Action)
				if r.Replayed {
					replays++
				}
			}
			assert.Equal(t, c.effects, p.effects(t))
			assert.Equal(t, 2-c.effects, replays)
			b.settled(t)
		})
	}
}

// A request that cannot be decoded is poison: terminated at once and
// reported, never delivered again.
func TestPoisonTerminated(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Second)
	var reported []idemnats.Result
	h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{
		OnTerm: func(_ context.Context, _ jetstream.Msg, r idemnats.Result) { reported = append(reported, r) },
	})
	b.publishRaw(t, []byte(`{"event_id": "evt-9", "amount": "not a number"}`), "poison")
	r := h.Handle(t.Context(), b.next(t))
	assert.Equal(t, idemnats.Term, r.Action)
	var dec *idemnats.DecodeError
	require.ErrorAs(t, r.Err, &dec)
	require.Len(t, reported, 1)
	b.settled(t) // terminated: no longer pending, whatever AckWait
	assert.Equal(t, 0, p.effects(t))
}

// The same key with another request is a mismatch: no delivery can ever
// succeed, so the message is terminated and reported.
func TestMismatchTerminated(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Minute)
	var reported int
	h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{Keys: byRequest, RequestKey: eventID,
		OnTerm: func(context.Context, jetstream.Msg, idemnats.Result) { reported++ }})
	b.publish(t, chargeRequest{EventID: "evt-3", Account: "acct", Amount: 300}, "a")
	b.publish(t, chargeRequest{EventID: "evt-3", Account: "acct", Amount: 301}, "b")
	first := h.Handle(t.Context(), b.next(t))
	require.NoError(t, first.Err)
	second := h.Handle(t.Context(), b.next(t))
	assert.Equal(t, idemnats.Term, second.Action)
	require.ErrorIs(t, second.Err, idem.ErrMismatch)
	assert.Equal(t, idemnats.FromRequest, second.Source)
	assert.Equal(t, 1, reported)
	assert.Equal(t, 1, p.effects(t))
	b.settled(t)
}

// A message delivered again while its first delivery still runs the
// method in another instance of the consumer: the second delivery gets
// idem.ErrInProgress and is nakked with the runtime's retry-after; the
// first acks when it is done.
func TestRedeliveredWhileRunning(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Second)
	h := idemnats.NewHandler(p.Payout, idemnats.Config[chargeRequest]{})
	other := idemnats.NewHandler(p.Payout, idemnats.Config[chargeRequest]{}) // another instance
	b.publish(t, chargeRequest{EventID: "evt-5", Account: "acct", Amount: 5}, "evt-5")
	first := make(chan idemnats.Result, 1)
	m := b.next(t)
	go func() { first <- h.Handle(t.Context(), m) }()
	<-p.started

	second := other.Handle(t.Context(), b.next(t)) // after AckWait
	assert.Equal(t, idemnats.Nak, second.Action)
	var inProgress *idem.InProgressError
	require.ErrorAs(t, second.Err, &inProgress)
	assert.Equal(t, inProgress.RetryAfter, second.Delay)
	assert.GreaterOrEqual(t, second.Delay, time.Second)

	close(p.release)
	r := <-first
	require.NoError(t, r.Err)
	assert.Equal(t, idemnats.Ack, r.Action)
	b.settled(t)
}

// A message delivered again while the same Handler still runs it: the copy
// is answered with InProgress without calling the wrapper (neither body nor
// ledger), and the first delivery's Ack settles the message.
func TestCopyOfARunningMessage(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Second)
	var settled []idemnats.Result
	h := idemnats.NewHandler(p.Payout, idemnats.Config[chargeRequest]{
		OnSettle: func(_ context.Context, _ jetstream.Msg, r idemnats.Result) { settled = append(settled, r) },
	})
	b.publish(t, chargeRequest{EventID: "evt-6", Account: "acct", Amount: 6}, "evt-6")
	first := make(chan idemnats.Result, 1)
	m := b.next(t)
	go func() { first <- h.Handle(t.Context(), m) }()
	<-p.started

	again := b.next(t) // after AckWait
	md, err := again.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 2, md.NumDelivered)
	second := h.Handle(t.Context(), again)
	assert.Equal(t, idemnats.InProgress, second.Action)
	require.ErrorIs(t, second.Err, idemnats.ErrDeliveryInFlight)
	require.ErrorIs(t, second.Err, idem.ErrInProgress)
	require.NoError(t, second.SettleErr)
	assert.Equal(t, []idemnats.Result{second}, settled)

	close(p.release)
	r := <-first
	require.NoError(t, r.Err)
	assert.Equal(t, idemnats.Ack, r.Action)
	b.settled(t)
	select {
	case <-p.started:
		t.Fatal("the copy ran the body")
	default:
	}
}

// A final error is acked: stored with the key, every delivery would get
// it. Listed in FinalErrors it is acked at once; unlisted, it is nakked
// once and its redelivery replays it (an *idem.ReplayedError), then acked.
func TestFinalErrorAcked(t *testing.T) {
	t.Run("listed", func(t *testing.T) {
		p, b := newPayments(t), newBroker(t, time.Minute)
		h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{FinalErrors: []error{errDeclined}})
		b.publish(t, chargeRequest{EventID: "evt-d", Amount: -1}, "evt-d")
		r := h.Handle(t.Context(), b.next(t))
		require.ErrorIs(t, r.Err, errDeclined)
		assert.Equal(t, idemnats.Ack, r.Action)
		b.settled(t)
	})
	t.Run("unlisted", func(t *testing.T) {
		p, b := newPayments(t), newBroker(t, time.Minute)
		h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{Backoff: func(uint64) time.Duration { return 0 }})
		b.publish(t, chargeRequest{EventID: "evt-d", Amount: -1}, "evt-d")
		r := h.Handle(t.Context(), b.next(t))
		require.ErrorIs(t, r.Err, errDeclined)
		assert.Equal(t, idemnats.Nak, r.Action)
		r = h.Handle(t.Context(), b.next(t))
		var replayed *idem.ReplayedError
		require.ErrorAs(t, r.Err, &replayed)
		assert.Equal(t, idemnats.Ack, r.Action)
		b.settled(t)
	})
}

// A ledger that cannot be reached naks the message with the backoff: the
// method did not run, a later delivery runs it.
func TestStoreErrorNakked(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Minute)
	pool, err := pgxpool.NewWithConfig(t.Context(), p.db.Pool.Config())
	require.NoError(t, err)
	pool.Close()
	p.store, err = idem.NewStore(pool)
	require.NoError(t, err)
	h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{Backoff: func(n uint64) time.Duration { return time.Duration(n) * time.Millisecond }})
	b.publish(t, chargeRequest{EventID: "evt-s", Amount: 1}, "evt-s")
	r := h.Handle(t.Context(), b.next(t))
	require.ErrorIs(t, r.Err, idem.ErrStore)
	assert.Equal(t, idemnats.Nak, r.Action)
	assert.Equal(t, time.Millisecond, r.Delay)
	assert.Equal(t, 0, p.effects(t))
}

func TestNewHandlerRefusesAnUnknownKeySource(t *testing.T) {
	require.PanicsWithError(t, "idemnats: NewHandler: unknown key source KeySource(9)", func() {
		idemnats.NewHandler((&payments{}).Charge, idemnats.Config[chargeRequest]{Keys: []idemnats.KeySource{9}})
	})
}

// A request whose -key field is empty is refused as an empty key, not
// keyed by the message ID behind the user's back; with Config.RequestKey
// set the handler skips the field instead and takes the next source.
func TestEmptyRequestKey(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		p, b := newPayments(t), newBroker(t, time.Minute)
		h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{})
		b.publish(t, chargeRequest{Account: "acct", Amount: 1}, "msg-e")
		r := h.Handle(t.Context(), b.next(t))
		assert.Equal(t, idemnats.Term, r.Action)
		require.ErrorIs(t, r.Err, idem.ErrInvalidKey)
		assert.Equal(t, idemnats.FromRequest, r.Source)
		assert.Equal(t, 0, p.effects(t))
		b.settled(t)
	})
	t.Run("RequestKey set", func(t *testing.T) {
		p, b := newPayments(t), newBroker(t, time.Minute)
		h := idemnats.NewHandler(p.Charge, idemnats.Config[chargeRequest]{RequestKey: eventID})
		b.publish(t, chargeRequest{Account: "acct", Amount: 1}, "msg-e")
		r := h.Handle(t.Context(), b.next(t))
		require.NoError(t, r.Err)
		assert.Equal(t, idemnats.FromMsgID, r.Source)
		assert.Equal(t, "msg-e", r.Key)
		assert.Equal(t, 1, p.effects(t))
		b.settled(t)
	})
}

func TestDefaultBackoff(t *testing.T) {
	for n, want := range map[uint64]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 1 << 40: time.Minute} {
		d := idemnats.DefaultBackoff(n)
		assert.True(t, d >= want/2 && d <= want, "DefaultBackoff(%d) = %s, want between %s and %s", n, d, want/2, want)
	}
}

// progressCounting counts the InProgress signals sent for a delivery.
type progressCounting struct {
	jetstream.Msg
	sent chan struct{}
}

func (m progressCounting) InProgress() error {
	m.sent <- struct{}{}
	return m.Msg.InProgress()
}

// With Progress set, the handler tells the server the call still runs,
// again and again while it does, and the delivery acks when it is done.
func TestProgressWhileRunning(t *testing.T) {
	p, b := newPayments(t), newBroker(t, time.Minute)
	h := idemnats.NewHandler(p.Payout, idemnats.Config[chargeRequest]{Progress: 10 * time.Millisecond})
	b.publish(t, chargeRequest{EventID: "evt-p", Amount: 5}, "evt-p")
	m := progressCounting{Msg: b.next(t), sent: make(chan struct{})}
	done := make(chan idemnats.Result, 1)
	go func() { done <- h.Handle(t.Context(), m) }()
	<-p.started
	<-m.sent
	<-m.sent // a second signal: sent periodically, not once
	close(p.release)
	go func() {
		for range m.sent { // signals sent before the call returned
		}
	}()
	r := <-done
	close(m.sent)
	require.NoError(t, r.Err)
	assert.Equal(t, idemnats.Ack, r.Action)
	b.settled(t)
}

// Every answer of the wrapper maps to the action the package doc's table
// gives it (the call here returns the answer, so that each kind is met
// without staging it on the database; the other tests stage them).
func TestAnswerTable(t *testing.T) {
	b := newBroker(t, time.Minute)
	backoff := 7 * time.Millisecond
	for _, c := range []struct {
		name   string
		err    error
		action idemnats.Action
		delay  time.Duration
	}{
		{"success", nil, idemnats.Ack, 0},
		{"replayed final error", &idem.ReplayedError{Name: "errDeclined", Msg: "declined", Sentinel: errDeclined}, idemnats.Ack, 0},
		{"listed final error", fmt.Errorf("charge: %w", errDeclined), idemnats.Ack, 0},
		{"in progress", &idem.InProgressError{RetryAfter: 3 * time.Second}, idemnats.Nak, 3 * time.Second},
		{"in progress, short", &idem.InProgressError{RetryAfter: time.Millisecond}, idemnats.Nak, time.Second},
		{"lock lost", fmt.Errorf("x: %w", idem.ErrLockLost), idemnats.Nak, time.Second},
		{"store", fmt.Errorf("x: %w", idem.ErrStore), idemnats.Nak, backoff},
		{"commit not confirmed by the standby", fmt.Errorf("%w: %w", idem.ErrOutcomeNotRecorded, idem.ErrStore), idemnats.Nak, backoff},
		{"other", errors.New("bank unreachable"), idemnats.Nak, backoff},
		{"mismatch", &idem.MismatchError{Method: "m", Key: "k"}, idemnats.Term, 0},
		{"invalid key", &idem.KeyError{Reason: "empty"}, idemnats.Term, 0},
		{"no key", idem.ErrNoKey, idemnats.Term, 0},
		{"invalid scope", &idem.ScopeError{Reason: "not valid UTF-8"}, idemnats.Term, 0},
		{"outcome not recorded, replayed", &idem.ReplayedError{Name: "x", Msg: "m", Sentinel: idem.ErrOutcomeNotRecorded}, idemnats.Term, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var reported int
			h := idemnats.NewHandler(func(context.Context, chargeRequest) (receipt, error) { return receipt{}, c.err },
				idemnats.Config[chargeRequest]{
					FinalErrors: []error{errDeclined},
					Backoff:     func(uint64) time.Duration { return backoff },
					OnTerm:      func(context.Context, jetstream.Msg, idemnats.Result) { reported++ },
				})
			b.publish(t, chargeRequest{EventID: c.name, Amount: 1}, "")
			r := h.Handle(t.Context(), b.next(t))
			assert.Equal(t, c.action, r.Action)
			assert.Equal(t, c.delay, r.Delay)
			assert.Equal(t, c.err, r.Err)
			assert.Equal(t, map[bool]int{true: 1}[c.action == idemnats.Term], reported)
		})
	}
}
