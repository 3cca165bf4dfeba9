package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemnats"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The NATS scenario: business events published to a JetStream stream, each
// twice under two message IDs, consumed by a separate process (the test
// binary run again) through idemnats and an external method that pays at
// the bank with a downstream key. The consumer is killed with SIGKILL while
// one of its calls is at the bank, and started again; the NATS server is
// restarted once on its kept store; a share of acks never reaches the
// server; one message is poison.
const (
	natsWorkerEnv = "FAULTS_NATS_WORKER" // set: run as the NATS consumer, not as tests
	natsURLEnv    = "FAULTS_NATS_URL"    // the NATS server the consumer connects to

	natsStream   = "EVENTS"
	natsConsumer = "payouts"
	natsSubject  = "events.payout"
	// natsAckWait is the consumer's AckWait: a delivery not acked within it
	// is delivered again.
	natsAckWait = time.Second
	// natsDropEvery: the first delivery of every natsDropEvery-th message
	// loses its ack (the server never gets it).
	natsDropEvery = 5
)

// natsEvent is a message's data. EventID names the business event: the
// same in both publications of one event, under different message IDs.
type natsEvent struct {
	EventID string `json:"event_id"`
	Amount  int64  `json:"amount"`
}

// natsLine is what the consumer prints: one line per settle it sends
// (Action set, before sending it), one per message it is done with
// (Done set), one per message it terminates and reports (Reported set).
type natsLine struct {
	Seq        uint64
	Action     string `json:",omitempty"`
	Dropped    bool   `json:",omitempty"` // an Ack the server never gets
	Done       bool   `json:",omitempty"`
	Replayed   bool   `json:",omitempty"`
	InProgress bool   `json:",omitempty"`
	Reported   bool   `json:",omitempty"`
	// Call is one call of the method (set alone), for the history.
	Call *historyCall `json:",omitempty"`
}

// historyCall is a call made in another process, as the history records it.
type historyCall struct {
	Key, Fingerprint string
	Start, End       time.Time
	Err              string `json:",omitempty"` // errKind, "" for a success
	Value            string `json:",omitempty"` // the answer (render)
	Replayed         bool   `json:",omitempty"`
}

// natsWorkerMain consumes the stream until it is killed.
func natsWorkerMain() int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "nats worker:", err)
		return 2
	}
	pool, err := pgxpool.New(ctx, os.Getenv(workerDB))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	store, err := idem.NewStore(pool, idem.WithLockTimeout(lockTimeout), idem.WithRetention(time.Hour), idem.WithHeartbeat(lockTimeout/4),
		idem.WithHooks(idem.Hooks{Executed: func(ctx context.Context, _ idem.Event) { markRan(ctx) }}))
	if err != nil {
		return fail(err)
	}
	svc := newService(store, httpBank{url: os.Getenv(workerBank)})
	nc, err := nats.Connect(os.Getenv(natsURLEnv), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	cons, err := js.Consumer(ctx, natsStream, natsConsumer)
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(l natsLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	seq := func(m jetstream.Msg) uint64 {
		md, _ := m.Metadata()
		return md.Sequence.Stream
	}
	// payout is the generated wrapper's method of an external Payout
	// generated with -key=ev.EventID: the key from the context, or from the
	// field when the context carries none.
	payout := func(ctx context.Context, ev natsEvent) (payout, error) {
		if _, ok := idem.KeyFrom(ctx); !ok {
			ctx = idem.ContextWithKey(ctx, ev.EventID)
		}
		// Each call is printed for the history. The handler's own
		// idem.Outcome is in ctx (another would hide it from the handler):
		// in external mode a body runs only under the call's own claim, so
		// a success without it is a replay.
		key, _ := idem.KeyFrom(ctx)
		req := request{Memo: ev.EventID, Amount: ev.Amount}
		ctx, ran := withRan(ctx)
		c := historyCall{Key: key, Fingerprint: fmt.Sprintf("%x", fingerprint(payoutName, req)), Start: time.Now()}
		p, err := svc.Payout(ctx, req)
		c.End, c.Replayed = time.Now(), !ran.Load()
		if err != nil {
			c.Err = errKind(err)
		} else {
			c.Value = render(p)
		}
		emit(natsLine{Call: &c})
		return p, err
	}
	h := idemnats.NewHandler(payout, idemnats.Config[natsEvent]{
		Keys:       []idemnats.KeySource{idemnats.FromRequest, idemnats.FromMsgID, idemnats.FromSequence},
		RequestKey: func(ev natsEvent) string { return ev.EventID },
		Timeout:    callDeadline,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		OnTerm: func(_ context.Context, m jetstream.Msg, _ idemnats.Result) {
			emit(natsLine{Seq: seq(m), Reported: true})
		},
		OnSettle: func(_ context.Context, m jetstream.Msg, r idemnats.Result) {
			emit(natsLine{Seq: seq(m), Done: true, Replayed: r.Replayed, InProgress: errors.Is(r.Err, idem.ErrInProgress)})
		},
	})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		drop := md.NumDelivered == 1 && md.Sequence.Stream%natsDropEvery == 0
		h.Handle(ctx, &reportingMsg{Msg: m, seq: md.Sequence.Stream, drop: drop, emit: emit})
	}, jetstream.PullMaxMessages(16))
	if err != nil {
		return fail(err)
	}
	defer cc.Stop()
	select {} // until killed
}

// reportingMsg prints each settle before sending it, so a line is never
// missing for a settle the server got; with drop set, its Ack is never sent.
type reportingMsg struct {
	jetstream.Msg
	seq  uint64
	drop bool
	emit func(natsLine)
}

func (m *reportingMsg) Ack() error {
	m.emit(natsLine{Seq: m.seq, Action: "ack", Dropped: m.drop})
	if m.drop {
		return nil
	}
	return m.Msg.Ack()
}

func (m *reportingMsg) NakWithDelay(d time.Duration) error {
	m.emit(natsLine{Seq: m.seq, Action: "nak"})
	return m.Msg.NakWithDelay(d)
}

func (m *reportingMsg) TermWithReason(reason string) error {
	m.emit(natsLine{Seq: m.seq, Action: "term"})
	return m.Msg.TermWithReason(reason)
}

// natsServer is a NATS server with JetStream run in this process on
// loopback, restartable on the same port and store.
type natsServer struct {
	t    *testing.T
	opts server.Options
	srv  *server.Server
}

func startNATS(t *testing.T) *natsServer {
	ns := &natsServer{t: t, opts: server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	ns.start()
	ns.opts.Port = ns.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { ns.srv.Shutdown() })
	return ns
}

func (ns *natsServer) start() {
	opts := ns.opts
	srv, err := server.NewServer(&opts)
	require.NoError(ns.t, err)
	go srv.Start()
	require.True(ns.t, srv.ReadyForConnections(time.Minute), "the NATS server did not start")
	ns.srv = srv
}

// restart stops the server and starts it again on its port and its
// JetStream store.
func (ns *natsServer) restart() {
	ns.srv.Shutdown()
	ns.srv.WaitForShutdown()
	ns.start()
}

// natsCounts are the scenario's figures.
type natsCounts struct {
	messages, events, effects      int
	deliveries, dropped            int
	ackedOrTerminated, pending     int
	replays, inProgress            int
	repeatedCalls, doubleEffects   int
	poisonTerminated, poisonReport int
}

func TestNATSConsumer(t *testing.T) {
	n := size(100, 2000)
	db := idemtest.New(t)
	b := newBank()

	// The bank: the k-th call is held, without moving money, while the
	// consumer is killed; a call for a downstream key that already moved
	// money is a repeated downstream call.
	var (
		mu            sync.Mutex
		calls         int
		repeatedCalls int
	)
	held := make(chan struct{})
	holdAt := n / 3
	bankSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req transfer
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls++
		hold := calls == holdAt
		b.mu.Lock()
		if _, done := b.transfers[req.Key]; done {
			repeatedCalls++
		}
		b.mu.Unlock()
		mu.Unlock()
		if hold { // the call is at the bank when its consumer dies
			close(held)
			<-r.Context().Done()
			return
		}
		tr, err := b.Transfer(r.Context(), req.Key, req.Memo, req.Amount)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(tr)
	}))
	defer bankSrv.Close()

	ns := startNATS(t)
	nc, err := nats.Connect(ns.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := t.Context()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{"events.>"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{
		Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: natsAckWait,
	})
	require.NoError(t, err)

	// Every event twice, under two message IDs; the poison in the middle.
	var poisonSeq uint64
	for i := range n {
		data, err := json.Marshal(natsEvent{EventID: fmt.Sprintf("evt-%05d", i), Amount: int64(100 + i)})
		require.NoError(t, err)
		for twin := range 2 {
			_, err := js.Publish(ctx, natsSubject, data, jetstream.WithMsgID(fmt.Sprintf("pub-%05d-%d", i, twin)))
			require.NoError(t, err)
		}
		if i == n/2 {
			ack, err := js.Publish(ctx, natsSubject, []byte(`{"event_id": 42`), jetstream.WithMsgID("poison"))
			require.NoError(t, err)
			poisonSeq = ack.Sequence
		}
	}
	messages := 2*n + 1

	var (
		lines   []natsLine
		linesMu sync.Mutex
		runs    []time.Time // when each consumer started
	)
	consume := func() (kill func()) {
		runs = append(runs, time.Now())
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), natsWorkerEnv+"=1", workerDB+"="+suite.pg.URL(db.Name),
			workerBank+"="+bankSrv.URL, natsURLEnv+"="+ns.srv.ClientURL())
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		read := make(chan struct{})
		go func() {
			defer close(read)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l natsLine
				if json.Unmarshal(sc.Bytes(), &l) == nil {
					linesMu.Lock()
					lines = append(lines, l)
					linesMu.Unlock()
				}
			}
		}()
		var once sync.Once
		kill = func() {
			once.Do(func() {
				_ = cmd.Process.Kill() // SIGKILL
				<-read
				_ = cmd.Wait()
			})
		}
		t.Cleanup(kill) // a scenario that fails leaves no consumer running
		return kill
	}
	transfers := func() int {
		ts, _ := b.snapshot()
		return len(ts)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(settleBound)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("NATS scenario: %s did not happen within %s (%d of %d events paid)", what, settleBound, transfers(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	kill := consume()
	select {
	case <-held:
	case <-time.After(settleBound):
		t.Fatalf("NATS scenario: the consumer never reached call %d at the bank", holdAt)
	}
	kill() // while its call is at the bank

	kill = consume()
	waitFor("two thirds of the events paid", func() bool { return transfers() >= 2*n/3 })
	ns.restart()
	pending := func() int {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, err := cons.Info(ictx)
		if err != nil {
			return -1
		}
		return info.NumAckPending + int(info.NumPending)
	}
	waitFor("every message settled", func() bool { return transfers() >= n && pending() == 0 })
	kill()

	c := natsCounts{messages: messages, events: n, effects: transfers(), pending: pending()}
	settled := map[uint64]bool{}
	for _, l := range lines {
		switch {
		case l.Reported:
			if l.Seq == poisonSeq {
				c.poisonReport++
			}
		case l.Done:
			c.deliveries++
			if l.Replayed {
				c.replays++
			}
			if l.InProgress {
				c.inProgress++
			}
		case l.Action == "ack" && l.Dropped:
			c.dropped++
		case l.Action == "ack", l.Action == "term":
			settled[l.Seq] = true
			if l.Action == "term" && l.Seq == poisonSeq {
				c.poisonTerminated++
			}
		}
	}
	c.ackedOrTerminated = len(settled)
	ts, _ := b.snapshot()
	perEvent := map[string]int{}
	for _, tr := range ts {
		perEvent[tr.Memo]++
	}
	for _, k := range perEvent {
		c.doubleEffects += k - 1
	}
	mu.Lock()
	c.repeatedCalls = repeatedCalls
	mu.Unlock()

	checkNATSHistory(t, lines, runs, ts, n)
	t.Logf("NATS JetStream consumer, %d events (go test -run TestNATSConsumer -v%s):\n%s", n, map[bool]string{true: " -faults.long"}[*long], natsTable(c))
	assert.Equal(t, n, c.effects, "effects")
	assert.Equal(t, n, len(perEvent), "events paid")
	assert.Zero(t, c.doubleEffects, "events paid twice")
	assert.Equal(t, messages, c.ackedOrTerminated, "messages acked or terminated")
	assert.Zero(t, c.pending, "messages still pending")
	assert.Zero(t, c.repeatedCalls, "repeated downstream calls")
	assert.Equal(t, 1, c.poisonTerminated, "terminations of the poisoned message")
	assert.Equal(t, 1, c.poisonReport, "reports of the poisoned message")
	assert.Positive(t, c.dropped, "no ack was dropped")
}

// natsTable renders the figures as a markdown table.
func natsTable(c natsCounts) string {
	var b strings.Builder
	b.WriteString("| messages (events × 2 + poison) | effects | acked or terminated | pending at the end | repeated downstream calls | events paid twice | deliveries | acks dropped | replays | in progress (nakked) | poison terminated, reported |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| %d (%d × 2 + 1) | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d, %d |\n",
		c.messages, c.events, c.effects, c.ackedOrTerminated, c.pending, c.repeatedCalls, c.doubleEffects,
		c.deliveries, c.dropped, c.replays, c.inProgress, c.poisonTerminated, c.poisonReport)
	return b.String()
}

// checkNATSHistory checks the consumers' calls for linearizability, with
// the bank's transfers as the effects. Each consumer was killed: every event
// may have had a call in flight then, one that never returned.
func checkNATSHistory(t *testing.T, lines []natsLine, runs []time.Time, transfers []transfer, n int) {
	t.Helper()
	rec := linear.NewRecorder()
	for _, l := range lines {
		if c := l.Call; c != nil {
			out := linear.Output{Answer: linear.Value, Value: c.Value, Replayed: c.Replayed}
			if c.Err != "" {
				out = errOutput(c.Err, c.Replayed, false)
			}
			rec.Add(linear.Input{Key: c.Key, Fingerprint: c.Fingerprint}, c.Start, c.End, out)
		}
	}
	for i := range n {
		ev := fmt.Sprintf("evt-%05d", i)
		fp := fmt.Sprintf("%x", fingerprint(payoutName, request{Memo: ev, Amount: int64(100 + i)}))
		for _, start := range runs {
			rec.Add(linear.Input{Key: ev, Fingerprint: fp}, start, start, linear.Output{Answer: linear.Unknown})
		}
	}
	effects := map[string][]string{}
	for _, tr := range transfers {
		effects[tr.Memo] = append(effects[tr.Memo], render(tr))
	}
	rec.Observe(effects)
	name := "NATS consumer killed, NATS restarted"
	res, err := linear.Check(name, rec.History(), *pictures, checkTimeout)
	require.NoError(t, err)
	assertLongOperations(t, name, res)
	t.Logf("%s: %s (%d calls)", name, res, rec.Calls())
	record(figures{name: name, linear: res})
	assert.NoError(t, res.Err(), "%s", name)
}
