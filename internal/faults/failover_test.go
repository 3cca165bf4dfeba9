package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

const (
	// failoverDeadline is each call's own deadline in the failover scenario.
	failoverDeadline = time.Second
	// replicationLatency delays the WAL on its way to the standby, as a
	// standby in another zone sees it: an asynchronous standby runs this
	// far behind, a synchronous commit waits at least this long.
	replicationLatency = 50 * time.Millisecond
	// failoverBound bounds how long one client keeps retrying its intention.
	failoverBound = 2 * time.Minute
)

// replication is one setting of the scenario: the primary's
// synchronous_commit with a synchronous standby, or none (asynchronous).
type replication struct {
	name  string
	level string // "" for asynchronous replication
}

var replications = []replication{{"async", ""}, {"sync on", "on"}, {"sync remote_apply", "remote_apply"}}

// failoverCounts are one mode's figures under one setting.
type failoverCounts struct {
	intentions, effects int
	lost                int // answered success, but the effect answered is gone (or answered differently) after failover
	repeated            int // intentions with more than one effect
	unknown             int // answers of ErrOutcomeNotRecorded
	settledUnknown      int // intentions that replay a stored ErrOutcomeNotRecorded (external: a step's result went unrecorded)
	gaveUp              int // intentions not settled within failoverBound
}

// failoverWorld is one setting's cluster, pool, store and record of answers.
type failoverWorld struct {
	t       *testing.T
	cluster *pgserver.Cluster
	link    *toxiproxy.Proxy // the standby's replication connection
	pool    *pgxpool.Pool
	svc     *service
	bank    *bank

	history *linear.Recorder
	late    []intent // run only after the standby's link is cut (asynchronous)

	mu        sync.Mutex
	answers   map[string][]any // successes per intention (intent.id)
	unknown   map[string]int
	stored    map[string]bool // intentions that replay a stored unknown outcome
	gaveUp    map[string]bool
	succeeded atomic.Int64
	failed    atomic.Int64
}

// TestFailover runs atomic, external and inline calls under load against a
// primary with a streaming standby, kills the primary mid-run (its link to
// the standby cut first, as when its zone is lost) and promotes the
// standby; clients reconnect through a multi-host connection string with
// target_session_attrs=read-write. Per replication setting and mode it
// counts intentions, effects, successes whose effect is gone after the
// failover, and repeated effects. With synchronous replication none may be
// lost or repeated in any mode; atomic and inline never repeat (the work
// goes with its ledger row); asynchronous losses are measured.
func TestFailover(t *testing.T) {
	n := 10
	if *long {
		n = 1200
	}
	table := map[string]map[kind]failoverCounts{}
	clusters := startLinkedClusters(t, len(replications))
	for i, r := range replications {
		t.Run(strings.ReplaceAll(r.name, " ", "_"), func(t *testing.T) {
			w := newFailoverWorld(t, r, clusters[i])
			ins := withInline(intents("fo", n, n), "fo", n)
			if r.level == "" {
				// One intention of each mode runs to success after the
				// standby's link is cut and before the primary dies: its
				// success is certainly lost with an asynchronous standby.
				w.late = withInline(intents("fo-late", 1, 1), "fo-late", 1)
			}
			counts := w.run(ins, r)
			table[r.name] = counts
			w.checkLinear(r, append(ins, w.late...))
			for _, k := range []kind{atomicCall, externalCall, inlineCall} {
				c := counts[k]
				assert.Zero(t, c.gaveUp, "%s %s: intentions not settled", r.name, kindName(k))
				if r.level != "" || k != externalCall {
					assert.Zero(t, c.repeated, "%s %s: repeated effects", r.name, kindName(k))
				}
				if r.level != "" {
					assert.Zero(t, c.lost, "%s %s: successes lost in the failover", r.name, kindName(k))
				}
			}
		})
	}
	t.Logf("failover, %d intentions per mode (go test -run TestFailover -v%s):\n%s", n, map[bool]string{true: " -faults.long"}[*long], failoverTable(table))
}

func kindName(k kind) string { return [...]string{"atomic", "external", "inline"}[k] }

// failoverTable renders the figures as a markdown table.
func failoverTable(table map[string]map[kind]failoverCounts) string {
	var b strings.Builder
	b.WriteString("| replication | mode | intentions | effects | success then lost | repeated effects | outcome unknown answers | settled as unknown |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range replications {
		for _, k := range []kind{atomicCall, externalCall, inlineCall} {
			c, ok := table[r.name][k]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d |\n", r.name, kindName(k), c.intentions, c.effects, c.lost, c.repeated, c.unknown, c.settledUnknown)
		}
	}
	return b.String()
}

// linkedCluster is a cluster whose standby streams from the primary through
// a fault proxy (link).
type linkedCluster struct {
	cluster *pgserver.Cluster
	link    *toxiproxy.Proxy
	err     error
}

// startLinkedClusters starts n clusters at once (their start-up is most of
// the scenario's time) and stops them when the test ends.
func startLinkedClusters(t *testing.T, n int) []*linkedCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]*linkedCluster, n)
	var wg sync.WaitGroup
	for i := range out {
		lc := &linkedCluster{}
		out[i] = lc
		wg.Go(func() {
			lc.cluster, lc.err = pgserver.StartCluster(ctx, pgserver.ClusterConfig{Standbys: 1, Via: func(primary string) (string, error) {
				lc.link = toxiproxy.NewProxy(suite.toxic, fmt.Sprintf("%s_%d", t.Name(), i), "127.0.0.1:0", primary)
				return lc.link.Listen, lc.link.Start()
			}})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, lc := range out {
			if lc.link != nil {
				lc.link.Stop()
			}
			if lc.cluster != nil {
				assert.NoError(t, lc.cluster.Close())
			}
		}
	})
	for _, lc := range out {
		require.NoError(t, lc.err)
	}
	return out
}

func newFailoverWorld(t *testing.T, r replication, lc *linkedCluster) *failoverWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &failoverWorld{t: t, bank: newBank(), history: linear.NewRecorder(), answers: map[string][]any{}, unknown: map[string]int{}, stored: map[string]bool{}, gaveUp: map[string]bool{}}
	w.cluster, w.link = lc.cluster, lc.link
	c := w.cluster
	var err error
	_, err = w.link.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"zone","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d}}`, replicationLatency.Milliseconds())))
	require.NoError(t, err)
	if r.level != "" {
		require.NoError(t, c.Synchronous(ctx, r.level))
	}
	ledger, err := idem.LedgerSchema(idem.DefaultTable)
	require.NoError(t, err)
	require.NoError(t, c.Primary.Exec(ctx, append(append(ledger.DDL(), paymentsDDL), inlineDDL(t)...)...))
	require.NoError(t, c.WaitReplayed(ctx))

	cfg, err := pgxpool.ParseConfig(c.URL("postgres"))
	require.NoError(t, err)
	cfg.MaxConns = 16
	cfg.ConnConfig.OnNotice = idem.NoticeHandler(cfg.ConnConfig.OnNotice)
	w.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(w.pool.Close)
	store, err := idem.NewStore(w.pool,
		idem.WithClaimWait(failoverDeadline/3),
		idem.WithLockTimeout(lockTimeout),
		idem.WithRetention(time.Hour),
		idem.WithHeartbeat(lockTimeout/4),
		idem.WithBackoff(5*time.Millisecond),
		// Above a synchronous commit's time on this loaded link: a step
		// write cut off by it is stored as an unknown outcome for good.
		idem.WithFinaliseTimeout(2*time.Second),
		idem.WithHooks(idem.Hooks{Executed: func(ctx context.Context, _ idem.Event) { markRan(ctx) }}))
	require.NoError(t, err)
	w.svc = newService(store, w.bank)
	return w
}

// run starts one client per intention, fails the cluster over once a third
// of them have succeeded, waits for every client, has each retry once more,
// and counts.
func (w *failoverWorld) run(ins []intent, r replication) map[kind]failoverCounts {
	t := w.t
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Go(func() { w.client(in) })
	}
	w.waitUntil("a third of the intentions succeed", func() bool { return w.succeeded.Load() >= int64(len(ins)/3) })
	w.failover(r)
	wg.Wait()
	// Every client retries once more after the failover, as one whose
	// answer was lost on the way does: a key the new primary has forgotten
	// runs again.
	for _, in := range append(ins, w.late...) {
		wg.Go(func() { w.client(in) })
	}
	wg.Wait()
	counts := w.count(append(ins, w.late...))
	t.Logf("%s: %+v", r.name, counts)
	return counts
}

// failover cuts the standby's link, lets synchronous commits already
// waiting for it run into their callers' deadlines, kills the primary and
// promotes the standby.
func (w *failoverWorld) failover(r replication) {
	t := w.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w.link.Stop()
	for _, in := range w.late {
		w.client(in)
	}
	if r.level != "" {
		// Commits wait for the standby now; let callers give up on some
		// (their COMMITs are cut short by the finalise timeout, their
		// retries find the rows on the primary) before it dies.
		failed := w.failed.Load()
		w.waitUntil("a call fails while the standby is away", func() bool { return w.failed.Load() > failed })
	}
	require.NoError(t, w.cluster.Primary.Kill(ctx))
	require.NoError(t, w.cluster.Standbys[0].Promote(ctx))
}

// waitUntil polls cond; it fails the test after a minute.
func (w *failoverWorld) waitUntil(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// client calls in until it succeeds, as a client with one key per intention
// does, whatever the error (an unknown outcome included: a retry under the
// same key is how a client finds out), for at most failoverBound. A key that
// replays a stored unknown outcome has settled: no retry changes it.
func (w *failoverWorld) client(in intent) {
	giveUp := time.Now().Add(failoverBound)
	backoff := 5 * time.Millisecond
	for {
		resp, replayed, err := w.call(in)
		unknown := errors.Is(err, idem.ErrOutcomeNotRecorded)
		w.mu.Lock()
		switch {
		case err == nil:
			w.answers[in.id()] = append(w.answers[in.id()], resp)
		case unknown:
			w.unknown[in.id()]++
			w.stored[in.id()] = w.stored[in.id()] || replayed
		}
		w.mu.Unlock()
		if err == nil || unknown && replayed {
			w.succeeded.Add(1)
			return
		}
		w.failed.Add(1)
		if time.Now().After(giveUp) {
			w.mu.Lock()
			w.gaveUp[in.id()] = true
			w.mu.Unlock()
			return
		}
		backoff = min(2*backoff, 500*time.Millisecond)
		time.Sleep(time.Duration(rand.Int64N(int64(backoff))) + time.Millisecond)
	}
}

// call makes one call of in; replayed reports a stored answer.
func (w *failoverWorld) call(in intent) (resp any, replayed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	ctx, o := idem.ContextWithOutcome(idem.ContextWithScope(idem.ContextWithKey(ctx, in.key), scope))
	ctx, ran := withRan(ctx)
	lc := w.history.Begin(linInputAt(in, in.key))
	defer func() {
		if err == nil {
			lc.End(linear.Output{Answer: linear.Value, Value: render(resp), Replayed: replayed, Ran: ran.Load()})
		} else {
			lc.End(errOutput(errKind(err), replayed, ran.Load()))
		}
	}()
	switch in.kind {
	case atomicCall:
		resp, err = w.svc.Charge(ctx, in.req)
	case externalCall:
		resp, err = w.svc.Payout(ctx, in.req)
	default:
		resp, err = w.svc.Order(ctx, in.req)
	}
	return resp, o.Replayed(), err
}

// count reads the effects on the new primary and the bank and counts per
// mode.
func (w *failoverWorld) count(ins []intent) map[kind]failoverCounts {
	t := w.t
	ctx := context.Background()
	rows, err := w.pool.Query(ctx, `SELECT id, key, memo, amount FROM payments`)
	require.NoError(t, err)
	payments := map[int64]receipt{}
	paid := map[string]int{}
	for rows.Next() {
		var r receipt
		require.NoError(t, rows.Scan(&r.ID, &r.Key, &r.Memo, &r.Amount))
		payments[r.ID] = r
		paid[r.Memo]++
	}
	require.NoError(t, rows.Err())
	transfers, _ := w.bank.snapshot()
	moved := map[string]int{}
	for _, tr := range transfers {
		moved[tr.Memo]++
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := map[kind]failoverCounts{}
	for _, in := range ins {
		c := counts[in.kind]
		c.intentions++
		effects := paid[in.req.Memo]
		if in.kind == externalCall {
			effects = moved[in.req.Memo]
		}
		c.effects += effects
		if effects > 1 {
			c.repeated++
		}
		c.unknown += w.unknown[in.id()]
		if w.stored[in.id()] {
			c.settledUnknown++
		}
		if w.gaveUp[in.id()] {
			c.gaveUp++
		}
		if w.lostAnswer(in, payments) {
			c.lost++
		}
		counts[in.kind] = c
	}
	return counts
}

// lostAnswer reports whether an answer of success for in is not what holds
// after the failover: a payment that is not in the table, or (external) a
// transfer other than the one the intention's last answer names.
func (w *failoverWorld) lostAnswer(in intent, payments map[int64]receipt) bool {
	answers := w.answers[in.id()]
	for _, a := range answers {
		switch r := a.(type) {
		case receipt:
			if p, ok := payments[r.ID]; !ok || p.Memo != in.req.Memo {
				return true
			}
		case payout:
			if r != answers[len(answers)-1].(payout) {
				return true
			}
		}
	}
	return false
}

// checkLinear checks the setting's history for linearizability: with a
// synchronous standby it must be linearizable; with an asynchronous one
// (documented unsafe for external mode, docs/ha.md) it must not be, and the
// successes of the intentions made after the link was cut must be among
// what the checker reports.
func (w *failoverWorld) checkLinear(r replication, ins []intent) {
	t := w.t
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT id, key, memo, amount FROM payments`)
	require.NoError(t, err)
	payments := map[int64]receipt{}
	for rows.Next() {
		var p receipt
		require.NoError(t, rows.Scan(&p.ID, &p.Key, &p.Memo, &p.Amount))
		payments[p.ID] = p
	}
	require.NoError(t, rows.Err())
	transfers, _ := w.bank.snapshot()
	name := "failover to a standby, " + r.name
	res := checkHistory(t, name, w.history, ins, func(in intent) string { return in.key }, payments, transfers)
	t.Logf("%s: %s", name, res)
	record(figures{name: name, linear: res})
	if r.level != "" {
		assert.NoError(t, res.Err(), "%s", name)
		return
	}
	require.Equal(t, porcupine.Illegal, res.Verdict, "%s: an asynchronous standby loses acknowledged work: the history must not be linearizable", name)
	for _, in := range w.late {
		assert.Contains(t, res.Failing, in.key, "%s: the success of %s, made after the standby's link was cut, is lost", name, in.key)
	}
	t.Logf("%s: as expected, %v", name, res.Err())
}
