package idemnats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemnats"
)

// slow is the payments service with a slow body, atomic or external, in a
// wrapper generated with -key=req.EventID: each body run counts itself,
// waits for hold, then writes its effect.
type slow struct {
	*payments
	external bool
	hold     func(ctx context.Context, req chargeRequest) error

	mu   sync.Mutex
	runs map[string]int // body runs per event
}

var (
	slowAtomic   = &idem.Method[receipt]{Name: "idemnats.test.SlowAtomic"}
	slowExternal = &idem.Method[receipt]{Name: "idemnats.test.SlowExternal", LockTimeout: time.Minute}
)

func newSlow(t *testing.T, external bool, hold func(ctx context.Context, req chargeRequest) error) *slow {
	t.Helper()
	return &slow{payments: newPayments(t), external: external, hold: hold, runs: map[string]int{}}
}

// Pay is the wrapper's method.
func (s *slow) Pay(ctx context.Context, req chargeRequest) (receipt, error) {
	ctx = withFieldKey(ctx, req)
	if s.external {
		return idem.External(ctx, s.store, slowExternal, fingerprint(slowExternal.Name, req), func(ctx context.Context) (receipt, error) {
			return s.body(ctx, s.db.Pool, req)
		})
	}
	return idem.Atomic(ctx, s.store, slowAtomic, fingerprint(slowAtomic.Name, req), func(ctx context.Context, tx pgx.Tx) (receipt, error) {
		return s.body(ctx, tx, req)
	})
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *slow) body(ctx context.Context, db execer, req chargeRequest) (receipt, error) {
	s.mu.Lock()
	s.runs[req.EventID]++
	s.mu.Unlock()
	if err := s.hold(ctx, req); err != nil {
		return receipt{}, err
	}
	_, err := db.Exec(ctx, `INSERT INTO payments (event, amount) VALUES ($1, $2)`, req.EventID, req.Amount)
	return receipt{PaymentID: 1}, err
}

// bodyRuns returns the body runs per event.
func (s *slow) bodyRuns() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.runs {
		out[k] = v
	}
	return out
}

// settles collects the Results of a Handler's messages (Config.OnSettle).
type settles struct {
	mu  sync.Mutex
	all []idemnats.Result
}

func (s *settles) add(_ context.Context, _ jetstream.Msg, r idemnats.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, r)
}

func (s *settles) results() []idemnats.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]idemnats.Result(nil), s.all...)
}

// within waits for ch, failing the test after a minute: what it waits for
// never happens when the handler runs one call at a time.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not happen within a minute", what)
	}
}

// events publishes n events, each under a message ID of its own.
func events(t *testing.T, b *broker, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-%d", i)
		b.publish(t, chargeRequest{EventID: ids[i], Account: "acct", Amount: int64(i + 1)}, "msg-"+ids[i])
	}
	return ids
}

func onceEach(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[id] = 1
	}
	return m
}

// With Concurrency, Consume's messages run Concurrency at a time (the
// first three bodies wait until all three run), each longer than AckWait,
// with Progress keeping the server from delivering them again: one body
// run per event, every message acked.
func TestConcurrentSlowCalls(t *testing.T) {
	for _, external := range []bool{false, true} {
		t.Run(map[bool]string{false: "atomic", true: "external"}[external], func(t *testing.T) {
			const ackWait, concurrency, n = time.Second, 3, 9
			var (
				mu        sync.Mutex
				started   int
				allRun    = make(chan struct{})
				rec       settles
				inBodyNow int
				most      int
			)
			s := newSlow(t, external, func(ctx context.Context, _ chargeRequest) error {
				mu.Lock()
				started++
				inBodyNow++
				most = max(most, inBodyNow)
				if started == concurrency {
					close(allRun)
				}
				mu.Unlock()
				defer func() { mu.Lock(); inBodyNow--; mu.Unlock() }()
				select { // the first calls wait for each other: they run at once or never end
				case <-allRun:
				case <-ctx.Done():
					return ctx.Err()
				}
				time.Sleep(3 * ackWait / 2) // slow: longer than AckWait
				return nil
			})
			b := newBroker(t, ackWait)
			h := idemnats.NewHandler(s.Pay, idemnats.Config[chargeRequest]{
				Concurrency: concurrency, Progress: ackWait / 10, OnSettle: rec.add,
			})
			ids := events(t, b, n)
			cc, err := b.cons.Consume(h.Func(t.Context()))
			require.NoError(t, err)
			within(t, allRun, fmt.Sprintf("%d calls running at once", concurrency))
			b.settled(t)
			cc.Stop()
			h.Wait()

			assert.Equal(t, onceEach(ids), s.bodyRuns(), "one body run per event")
			assert.Equal(t, n, s.effects(t))
			mu.Lock()
			assert.Equal(t, concurrency, most, "calls running at once, at most")
			mu.Unlock()
			acked := map[string]bool{}
			for _, r := range rec.results() {
				require.NotEqual(t, idemnats.Term, r.Action, "%+v", r)
				if r.Action == idemnats.Ack {
					assert.Equal(t, idemnats.FromRequest, r.Source)
					acked[r.Key] = true
				}
			}
			assert.Len(t, acked, n, "every event acked")
		})
	}
}

// copies signals, per event, when a second delivery of it has been
// settled (Config.OnSettle): a copy of a running message, answered while
// the first delivery runs.
type copies struct {
	mu   sync.Mutex
	done map[string]chan struct{}
	rec  settles
}

func newCopies(ids []string) *copies {
	c := &copies{done: map[string]chan struct{}{}}
	for _, id := range ids {
		c.done[id] = make(chan struct{})
	}
	return c
}

func (c *copies) onSettle(ctx context.Context, msg jetstream.Msg, r idemnats.Result) {
	c.rec.add(ctx, msg, r)
	var req chargeRequest
	md, err := msg.Metadata()
	if err != nil || json.Unmarshal(msg.Data(), &req) != nil || md.NumDelivered < 2 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.done[req.EventID]; ch != nil {
		close(ch)
		c.done[req.EventID] = nil
	}
}

// A call longer than AckWait with no progress in time (Progress far above
// AckWait, a misconfigured consumer): every event is delivered again while
// its first call runs (each body waits until a copy of its message has been
// answered), and the copy is answered with InProgress, an in-progress
// signal to the server, never by a second body run.
func TestRedeliveriesOfSlowCallsDoNotRunTheBody(t *testing.T) {
	for _, external := range []bool{false, true} {
		t.Run(map[bool]string{false: "atomic", true: "external"}[external], func(t *testing.T) {
			const ackWait, n = time.Second, 3
			b := newBroker(t, ackWait)
			ids := events(t, b, n)
			c := newCopies(ids)
			s := newSlow(t, external, func(ctx context.Context, req chargeRequest) error {
				c.mu.Lock()
				ch := c.done[req.EventID]
				c.mu.Unlock()
				if ch == nil {
					return nil
				}
				select {
				case <-ch:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			h := idemnats.NewHandler(s.Pay, idemnats.Config[chargeRequest]{
				Concurrency: n, Progress: time.Hour, OnSettle: c.onSettle,
			})
			cc, err := b.cons.Consume(h.Func(t.Context()))
			require.NoError(t, err)
			b.settled(t)
			cc.Stop()
			h.Wait()

			assert.Equal(t, onceEach(ids), s.bodyRuns(), "one body run per event")
			assert.Equal(t, n, s.effects(t))
			var copiesAnswered int
			for _, r := range c.rec.results() {
				require.NotEqual(t, idemnats.Term, r.Action, "%+v", r)
				if r.Action == idemnats.InProgress {
					require.ErrorIs(t, r.Err, idem.ErrInProgress)
					copiesAnswered++
				}
			}
			assert.GreaterOrEqual(t, copiesAnswered, n, "a copy of every event answered while it ran")
		})
	}
}

// A message waiting for a slot (both taken by calls that do not end) tells
// the server it is in progress, again and again, before its call starts.
func TestWaitingMessageSendsProgress(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 3)
	s := newSlow(t, true, func(ctx context.Context, req chargeRequest) error {
		started <- req.EventID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := newBroker(t, time.Minute)
	h := idemnats.NewHandler(s.Pay, idemnats.Config[chargeRequest]{Concurrency: 2, Progress: 10 * time.Millisecond})
	ids := events(t, b, 3)
	f := h.Func(t.Context())
	f(b.next(t))
	f(b.next(t))
	<-started
	<-started
	waiting := progressCounting{Msg: b.next(t), sent: make(chan struct{})}
	f(waiting)
	<-waiting.sent
	<-waiting.sent // a second signal: sent periodically while it waits
	select {
	case id := <-started:
		t.Fatalf("%s started while both slots were taken", id)
	default:
	}
	go func() {
		for range waiting.sent { // signals sent once its call runs
		}
	}()
	close(release)
	b.settled(t)
	h.Wait()
	close(waiting.sent)
	assert.Equal(t, onceEach(ids), s.bodyRuns())
}

func TestConcurrencyNeedsProgress(t *testing.T) {
	require.PanicsWithValue(t, idemnats.ErrConcurrencyWithoutProgress, func() {
		idemnats.NewHandler((&payments{}).Charge, idemnats.Config[chargeRequest]{Concurrency: 2})
	})
}
