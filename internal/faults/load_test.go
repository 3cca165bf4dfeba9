package faults

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

const (
	// callDeadline is every call's own deadline.
	callDeadline = 3 * time.Second
	// hangAfter is when a call that has not returned counts as hung. It is
	// not a timing margin: a call past its deadline may take longer only by
	// the runtime's documented bounds (seconds), never by a fault's length,
	// and the faults here last until every call has returned.
	hangAfter = callDeadline + 30*time.Second
	// settleBound bounds how long one caller keeps retrying its intention.
	settleBound = 3 * time.Minute
	// lockTimeout is the external method's lock: a crashed attempt's key is
	// taken over this long after its last heartbeat.
	lockTimeout = 2 * time.Second
)

var errHung = errors.New("call did not return")

// postmasterWaiter is the goroutine that waits for a (re)started server: it
// belongs to the suite, not to a scenario.
const postmasterWaiter = "github.com/idemgen/idemgen/runtime/idemtest/pgserver.startLocked.func1"

// toxicStub is a goroutine of the fault proxy's links; a link cut while a
// toxic is removed can leave one behind. It is the fault injector's, not
// the runtime's.
const toxicStub = "github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"

// bgReader is pgx's background reader. pgx starts it on a connection whose
// write takes longer than 15ms (a loaded machine), stops it when the write
// is done, and the goroutine ends only when its pending Read returns: on a
// connection that then stays idle, at the next message or when the
// connection closes. So it outlives a scenario on a connection that is not
// the scenario's own (idemtest's pool, which checks the tables) and proves
// nothing about leaks: a connection never closed has no goroutine of its
// own. Connections the scenario leaves open are caught by its pool's stats
// instead (openConns).
const bgReader = "github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"

// kind is the mode of an intention's method.
type kind int

const (
	atomicCall kind = iota
	externalCall
	inlineCall
)

// intent is one intention: a key and the request it names.
type intent struct {
	kind kind
	key  string
	req  request
}

// id names the intention: a key names a new intention after its retention
// ends, so the key alone does not.
func (in intent) id() string { return in.key + "\x00" + in.req.Memo }

// intents makes n intentions per kind; prefix keeps scenarios' keys apart.
func intents(prefix string, atomicN, externalN int) []intent {
	var ins []intent
	for i := range atomicN {
		ins = append(ins, intent{atomicCall, fmt.Sprintf("%s-a-%05d", prefix, i), request{Memo: fmt.Sprintf("%s charge %d", prefix, i), Amount: int64(100 + i)}})
	}
	for i := range externalN {
		ins = append(ins, intent{externalCall, fmt.Sprintf("%s-x-%05d", prefix, i), request{Memo: fmt.Sprintf("%s payout %d", prefix, i), Amount: int64(200 + i)}})
	}
	return ins
}

// withInline adds n inline intentions to ins.
func withInline(ins []intent, prefix string, n int) []intent {
	for i := range n {
		ins = append(ins, intent{inlineCall, fmt.Sprintf("%s-i-%05d", prefix, i), request{Memo: fmt.Sprintf("%s order %d", prefix, i), Amount: int64(300 + i)}})
	}
	return ins
}

// figures are one scenario's counts, logged as a line and kept for the table.
type figures struct {
	name                  string
	calls, ok             int64
	intentions, effects   int
	unknown               int // intentions whose outcome is stored as unknown
	replays, inProgress   int64
	errors                map[string]int64
	maxLatency            time.Duration
	hung, gaveUp, bodyRan int64
	late                  int64 // calls still running a second past their deadline
	// linear is the verdict of the linearizability check of the
	// scenario's history (zero if it was not checked).
	linear linear.Result
}

// env is one scenario's world: a fresh database (idemtest), a fault proxy in
// front of the server, a pool and store through the proxy, the bank, and the
// record of every call.
type env struct {
	t     *testing.T
	name  string
	db    *idemtest.DB // straight to the server: for checks
	proxy *toxiproxy.Proxy
	pool  *pgxpool.Pool // through the proxy (or PgBouncer); nil on the database/sql path
	sqlDB *sql.DB       // through the proxy, on the database/sql path; else nil
	cfg   envConfig
	store *idem.Store
	bank  *bank
	svc   *service
	leaks goleak.Option

	claimed, executed, errorsSeen atomic.Int64

	mu        sync.Mutex
	fig       figures
	responses map[string][]any // successful answers per intention (intent.id)
	unknown   map[string]int   // ErrOutcomeNotRecorded answers per intention (intent.id)
	firstErrs map[string]error // the first error of each kind, for messages
	inflight  map[int64]bool   // calls running now, by id
	nextID    int64
	history   *linear.Recorder
	linKeys   map[string]string // the history's key of each intention (intent.id), see linKey
	keyEras   map[string]int    // how many intentions each key has named so far
	returned  *sync.Cond        // signalled when a call returns
	stormDone bool              // every caller of the storm has finished
	lateStack string            // where the first call past its deadline waited
	done      chan struct{}     // closed when every caller of the storm has finished
}

// envConfig adjusts a scenario's env.
type envConfig struct {
	upstream  string // where the proxy forwards (default: the server)
	path      txPath // how the service reaches the server: pgx (default) or database/sql
	poolSize  int32
	execMode  pgx.QueryExecMode
	storeOpts []idem.Option
	setup     []string // statements run after the payments table is made
	// citus, if set, is the Citus cluster the scenario's database is made
	// on (newCitusEnv): the payments table is citusPaymentsDDL's, without
	// inline mode's columns.
	citus *idemtest.Server
	// maxActive, if set, bounds how many intentions a storm runs at once.
	maxActive int
	// executed, if set, runs in the Executed hook: after a body returned,
	// before its result is stored.
	executed func(context.Context, idem.Event)
}

func newEnv(t *testing.T, name string, cfg envConfig) *env {
	t.Helper()
	setup := append(append([]string{paymentsDDL}, inlineDDL(t)...), cfg.setup...)
	newDB := idemtest.New
	if cfg.citus != nil {
		setup = append(append([]string{}, citusPaymentsDDL...), cfg.setup...)
		newDB = cfg.citus.New
	}
	db := newDB(t, idemtest.WithSetup(setup...), idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.MaxConns = 8 }))
	e := &env{
		t: t, name: name, db: db, bank: newBank(),
		fig:       figures{name: name, errors: map[string]int64{}},
		responses: map[string][]any{},
		unknown:   map[string]int{},
		firstErrs: map[string]error{},
		inflight:  map[int64]bool{},
		history:   linear.NewRecorder(),
		linKeys:   map[string]string{},
		keyEras:   map[string]int{},
		// Everything running now (the test framework, idemtest's pools) is
		// not this scenario's to leak.
		leaks: goleak.IgnoreCurrent(),
	}
	e.returned = sync.NewCond(&e.mu)
	if cfg.upstream == "" {
		cfg.upstream = suite.pg.Addr()
	}
	e.proxy = toxiproxy.NewProxy(suite.toxic, strings.ReplaceAll(t.Name(), "/", "_"), "127.0.0.1:0", cfg.upstream)
	require.NoError(t, e.proxy.Start())
	e.connect(cfg)
	return e
}

// connect opens the scenario's pool (a *pgxpool.Pool, or a *sql.DB over
// pgx's database/sql driver on the database/sql path) through the proxy, and
// its store and service, replacing (and closing) any it had.
func (e *env) connect(cfg envConfig) {
	t := e.t
	t.Helper()
	e.closePool()
	pcfg, err := pgxpool.ParseConfig(pgserver.TCPURL(e.proxy.Listen, e.db.Name))
	require.NoError(t, err)
	pcfg.MaxConns = cmp(cfg.poolSize, 32)
	if cfg.execMode != 0 {
		pcfg.ConnConfig.DefaultQueryExecMode = cfg.execMode
	}
	switch cfg.path {
	case sqlPath:
		// What a database/sql service opens: its own connections through
		// pgx's driver, as many as the pgx path's pool, all kept idle.
		e.sqlDB = stdlib.OpenDB(*pcfg.ConnConfig)
		e.sqlDB.SetMaxOpenConns(int(pcfg.MaxConns))
		e.sqlDB.SetMaxIdleConns(int(pcfg.MaxConns))
	default:
		e.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg)
		require.NoError(t, err)
	}
	e.cfg = cfg
	e.store = e.storeWith()
	e.svc = newService(e.store, e.bank)
	e.svc.sql = cfg.path == sqlPath
}

// closePool closes the scenario's pool or *sql.DB, if it has one.
func (e *env) closePool() {
	if e.pool != nil {
		e.pool.Close() // waits for every acquired connection to come back
		e.pool = nil
	}
	if e.sqlDB != nil {
		// sql.DB.Close does not wait for connections in use: check that
		// none is left (background rollbacks end within the finalise
		// timeout), so a connection the runtime never gives back fails
		// the scenario.
		if n := e.openConns(); n > 0 {
			e.t.Errorf("%s: %d database/sql connections still in use after the calls returned", e.name, n)
		}
		require.NoError(e.t, e.sqlDB.Close())
		e.sqlDB = nil
	}
}

// openConns is the number of the *sql.DB's connections in use once those
// released in the background (a replay's rollback, bounded by the finalise
// timeout) are back: it waits up to connsBack for that.
func (e *env) openConns() int {
	deadline := time.Now().Add(connsBack)
	for {
		n := e.sqlDB.Stats().InUse
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connsBack bounds the wait for connections released in the background:
// far above the finalise timeout that bounds each of them.
const connsBack = 30 * time.Second

// storeWith returns a store over the scenario's pool, with its settings and
// hooks, and extra options after them.
func (e *env) storeWith(extra ...idem.Option) *idem.Store {
	t, cfg := e.t, e.cfg
	t.Helper()
	opts := append([]idem.Option{
		// Under the calls' deadline, as the README advises: a twin of a
		// holder that does not commit is told "in progress" and gives its
		// connection back, instead of timing out on it.
		idem.WithClaimWait(callDeadline / 3),
		idem.WithLockTimeout(lockTimeout),
		idem.WithRetention(time.Hour),
		idem.WithHeartbeat(lockTimeout / 4),
		idem.WithBackoff(5 * time.Millisecond),
		idem.WithHooks(idem.Hooks{
			Claimed: func(context.Context, idem.Event) { e.claimed.Add(1) },
			Executed: func(ctx context.Context, ev idem.Event) {
				markRan(ctx)
				e.executed.Add(1)
				if cfg.executed != nil {
					cfg.executed(ctx, ev)
				}
			},
		}),
	}, cfg.storeOpts...)
	opts = append(opts, extra...)
	var s *idem.Store
	var err error
	if cfg.path == sqlPath {
		s, err = idem.NewSQLStore(e.sqlDB, opts...)
	} else {
		s, err = idem.NewStore(e.pool, opts...)
	}
	require.NoError(t, err)
	return s
}

func cmp(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// outcome is what one call returned.
type outcome struct {
	resp     any
	err      error
	replayed bool
	ran      bool          // the body ran during the call (markRan)
	retry    time.Duration // RetryAfter of an in-progress answer
}

// ranKey keys the flag, in a call's context, that the Executed hook sets
// (markRan): the call's body ran.
type ranKey struct{}

// withRan returns ctx carrying a flag that markRan sets.
func withRan(ctx context.Context) (context.Context, *atomic.Bool) {
	ran := new(atomic.Bool)
	return context.WithValue(ctx, ranKey{}, ran), ran
}

// markRan notes, from the Executed hook, that the body of ctx's call ran.
func markRan(ctx context.Context) {
	if ran, ok := ctx.Value(ranKey{}).(*atomic.Bool); ok {
		ran.Store(true)
	}
}

// call makes one call of in with its own deadline and records it. wait asks
// an external call to wait for an attempt in progress (idem.ContextWithWait).
func (e *env) call(in intent, wait bool) outcome {
	return e.callWith(e.svc, in, wait)
}

func (e *env) callWith(svc *service, in intent, wait bool) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	ctx = idem.ContextWithScope(idem.ContextWithKey(ctx, in.key), scope)
	if wait {
		ctx = idem.ContextWithWait(ctx)
	}
	ctx, o := idem.ContextWithOutcome(ctx)
	ctx, ran := withRan(ctx)
	returned := make(chan struct{})
	ctx = context.WithValue(ctx, returnedKey{}, (<-chan struct{})(returned))

	e.mu.Lock()
	e.nextID++
	id := e.nextID
	e.inflight[id] = true
	lin := e.linInput(in)
	e.mu.Unlock()

	done := make(chan outcome, 1)
	lc := e.history.Begin(lin)
	start := time.Now()
	gid := make(chan string, 1)
	go func() {
		gid <- goroutineID()
		var out outcome
		switch in.kind {
		case atomicCall:
			out.resp, out.err = svc.Charge(ctx, in.req)
		case externalCall:
			out.resp, out.err = svc.Payout(ctx, in.req)
		case inlineCall:
			out.resp, out.err = svc.Order(ctx, in.req)
		}
		out.replayed, out.ran = o.Replayed(), ran.Load()
		close(returned)
		done <- out
	}()
	var out outcome
	timer := time.NewTimer(hangAfter)
	defer timer.Stop()
	late := time.NewTimer(callDeadline + time.Second)
	defer late.Stop()
	select {
	case out = <-done:
	case <-late.C:
		id := <-gid
		gid <- id
		e.noteLate(in.key, id)
		select {
		case out = <-done:
		case <-timer.C:
			out.err = fmt.Errorf("%w within %s (its deadline was %s); it waited here:\n%s",
				errHung, hangAfter, callDeadline, stackOf(<-gid))
		}
	case <-timer.C:
		out.err = fmt.Errorf("%w within %s (its deadline was %s); it waited here:\n%s",
			errHung, hangAfter, callDeadline, stackOf(<-gid))
	}
	lc.End(linOutput(out))
	e.recordCall(id, in, out, time.Since(start))
	return out
}

// linInput is the history's input for a call of in; e.mu is held.
func (e *env) linInput(in intent) linear.Input {
	return linInputAt(in, e.linKey(in))
}

// linInputAt is the history's input for a call of in under the history's
// key key.
func linInputAt(in intent, key string) linear.Input {
	return linear.Input{Key: key, Fingerprint: fmt.Sprintf("%x", fingerprint(methodName(in.kind), in.req))}
}

// linKey is the history's key of intention in; e.mu is held. It is the
// idempotency key, and for a key reused after its retention by a new
// intention (TestSweepRacesLiveClaims), the key and its era: each is a
// register of its own, which is what "after its retention the key is new"
// means.
func (e *env) linKey(in intent) string {
	if k, ok := e.linKeys[in.id()]; ok {
		return k
	}
	k := in.key
	if era := e.keyEras[in.key]; era > 0 {
		k = fmt.Sprintf("%s (era %d)", in.key, era)
	}
	e.keyEras[in.key]++
	e.linKeys[in.id()] = k
	return k
}

// methodName is the ledger's name of the method of kind k.
func methodName(k kind) string {
	return [...]string{chargeName, payoutName, orderName}[k]
}

// linOutput is the history's output of a call that returned out: a
// success, an outcome stored as unknown (a final answer, replayed), a
// mismatch, an in-progress answer, or an error whose outcome the caller
// cannot know (everything else: a deadline, a cut connection, a store
// error, a lost lock, a hung call).
func linOutput(out outcome) linear.Output {
	if out.err == nil {
		return linear.Output{Answer: linear.Value, Value: render(out.resp), Replayed: out.replayed, Ran: out.ran}
	}
	return errOutput(errKind(out.err), out.replayed, out.ran)
}

// errOutput is the history's output of an error of kind (errKind).
func errOutput(kind string, replayed, ran bool) linear.Output {
	switch kind {
	case "in_progress":
		return linear.Output{Answer: linear.InProgress}
	case "mismatch":
		return linear.Output{Answer: linear.Mismatch}
	case "unknown":
		return linear.Output{Answer: linear.StoredError, Value: "outcome not recorded", Replayed: replayed, Ran: ran}
	}
	return linear.Output{Answer: linear.Unknown}
}

// render is an answer or an effect as the history shows it: an answer
// renders as the effect it names.
func render(v any) string {
	switch r := v.(type) {
	case receipt:
		return fmt.Sprintf("payment %d (%s, %s, %d)", r.ID, r.Key, r.Memo, r.Amount)
	case payout:
		return fmt.Sprintf("transfer %s (%s, %d)", r.TransferID, r.Memo, r.Amount)
	case transfer:
		return render(payout{TransferID: r.ID, Memo: r.Memo, Amount: r.Amount})
	}
	return fmt.Sprintf("%+v", v)
}

// returnedKey keys the channel, in a call's context, that is closed when the
// call returns: hooks see which call they run in.
type returnedKey struct{}

// callReturned returns the channel closed when the call of ctx returns.
func callReturned(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(returnedKey{}).(<-chan struct{})
	return ch
}

// recordCall counts a call's outcome into the figures.
func (e *env) recordCall(id int64, in intent, out outcome, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.inflight, id)
	e.returned.Broadcast()
	e.fig.calls++
	e.fig.maxLatency = max(e.fig.maxLatency, took)
	if out.err == nil {
		e.fig.ok++
		if out.replayed {
			e.fig.replays++
		}
		e.responses[in.id()] = append(e.responses[in.id()], out.resp)
		return
	}
	e.errorsSeen.Add(1)
	k := errKind(out.err)
	e.fig.errors[k]++
	if k == "in_progress" {
		e.fig.inProgress++
	}
	if k == "hung" {
		e.fig.hung++
	}
	if k == "unknown" {
		e.unknown[in.id()]++
	}
	if _, ok := e.firstErrs[k]; !ok {
		e.firstErrs[k] = fmt.Errorf("key %s: %w", in.key, out.err)
	}
}

// noteLate keeps, once per scenario, where a call past its deadline waits.
func (e *env) noteLate(key, gid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fig.late++
	if e.lateStack == "" {
		e.lateStack = "key " + key + ":\n" + stackOf(gid)
	}
}

// goroutineID returns the id of the calling goroutine, as stacks print it.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// stackOf returns the stack of goroutine id, to show where a call waits.
func stackOf(id string) string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, "goroutine "+id+" ") {
			return g
		}
	}
	return "(goroutine " + id + " not found)"
}

// errKind names the kind of a call's error for the figures.
func errKind(err error) string {
	switch {
	case errors.Is(err, errHung):
		return "hung"
	case errors.Is(err, idem.ErrInProgress):
		return "in_progress"
	case errors.Is(err, idem.ErrMismatch):
		return "mismatch"
	case errors.Is(err, idem.ErrLockLost):
		return "lock_lost"
	case errors.Is(err, idem.ErrOutcomeNotRecorded) && !errors.Is(err, idem.ErrStore):
		// The call ran and its outcome is stored as unknown: every retry
		// replays this answer. (When storing that failed too, the key
		// stays locked until its lock expires, then settles: "store".)
		return "unknown"
	case errors.Is(err, idem.ErrStore):
		return "store"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	default:
		return "other"
	}
}

// retryUntilDone calls in until it succeeds, as a client with one key per
// intention does. It stops on answers a retry cannot change (hung, mismatch,
// an outcome stored as unknown) and after settleBound.
func (e *env) retryUntilDone(in intent, wait bool) {
	giveUp := time.Now().Add(settleBound)
	backoff := 5 * time.Millisecond
	for {
		out := e.call(in, wait)
		if out.err == nil {
			return
		}
		switch errKind(out.err) {
		case "hung", "mismatch", "unknown":
			return
		}
		if time.Now().After(giveUp) {
			e.mu.Lock()
			e.fig.gaveUp++
			e.mu.Unlock()
			return
		}
		// A client's retry pacing (not an ordering): capped exponential
		// backoff with full jitter, or the in-progress answer's RetryAfter.
		// The cap is what keeps a thousand retrying clients from holding
		// an overloaded machine in overload.
		backoff = min(2*backoff, 2*time.Second)
		pause := time.Duration(rand.Int64N(int64(backoff))) + time.Millisecond
		var ip *idem.InProgressError
		if errors.As(out.err, &ip) {
			pause = min(ip.RetryAfter, pause)
		}
		time.Sleep(pause)
	}
}

// storm starts twins callers per intention, each retrying until done, and
// returns a function that waits for all of them. Odd twins of external
// intentions wait for an attempt in progress instead of polling.
//
// In the long mode intentions start a tenth at a time, each with all its
// twins at once: ten times the intentions of the short mode, at the short
// mode's concurrency. (Started all at once, the long mode's thousands of
// callers keep a 2-core machine's pools saturated until every call ends in
// its deadline: no effect is repeated, but nothing settles either.)
func (e *env) storm(ins []intent, twins int) (wait func()) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	n := activeIntentions(len(ins))
	if e.cfg.maxActive > 0 {
		n = min(n, e.cfg.maxActive)
	}
	active := make(chan struct{}, n)
	for _, in := range ins {
		wg.Go(func() {
			<-release
			active <- struct{}{}
			defer func() { <-active }()
			var tw sync.WaitGroup
			for i := range twins {
				tw.Go(func() { e.retryUntilDone(in, i%2 == 1) })
			}
			tw.Wait()
		})
	}
	close(release)
	e.done = make(chan struct{})
	go func() {
		wg.Wait()
		e.mu.Lock()
		e.stormDone = true
		e.returned.Broadcast()
		e.mu.Unlock()
		close(e.done)
	}()
	return wg.Wait
}

// activeIntentions is how many of n intentions a storm runs at once.
func activeIntentions(n int) int {
	if *long {
		return max(1, n/10)
	}
	return max(1, n)
}

// allReturned is closed when every caller of the last storm has finished.
func (e *env) allReturned() <-chan struct{} { return e.done }

// waitFor polls cond until it holds; it fails the test after a minute.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: waited a minute for %s", e.name, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// drainInflight waits until every call running now has returned (each is
// bounded by hangAfter), and until at least one call has failed since it was
// called (the fault has been seen) or every caller has finished.
func (e *env) drainInflight() {
	e.mu.Lock()
	before := map[int64]bool{}
	for id := range e.inflight {
		before[id] = true
	}
	errs := e.errorsSeen.Load()
	for {
		still := false
		for id := range before {
			if e.inflight[id] {
				still = true
				break
			}
		}
		if !still && (e.errorsSeen.Load() > errs || e.stormDone) {
			break
		}
		e.returned.Wait()
	}
	e.mu.Unlock()
}

// addToxic adds a toxic to the proxy. stream is "upstream" (to the server) or
// "downstream" (to the client).
func (e *env) addToxic(name, typ, stream string, attrs string) {
	e.t.Helper()
	require.NoError(e.t, e.tryAddToxic(name, typ, stream, attrs), "add toxic %s", name)
}

// tryAddToxic is addToxic for goroutines other than the test's.
func (e *env) tryAddToxic(name, typ, stream string, attrs string) error {
	_, err := e.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)))
	return err
}

func (e *env) removeToxic(name string) {
	e.t.Helper()
	require.NoError(e.t, e.proxy.Toxics.RemoveToxic(context.Background(), name), "remove toxic %s", name)
}

// check asserts the promise for ins and records the figures: every intention
// settled (it succeeded, or its outcome is stored as unknown and replayed),
// exactly one effect per intention that succeeded, at most one per intention
// whose outcome is unknown, and no other effect; every success backed by its
// effect, equal answers per intention, no call hung, and no goroutine left
// behind.
func (e *env) check(ins []intent) {
	e.t.Helper()
	e.checkEffects(ins, true)
	e.finish()
}

// checkEffects asserts everything about effects and answers; complete also
// requires every intention to have settled.
func (e *env) checkEffects(ins []intent, complete bool) {
	t := e.t
	t.Helper()
	ctx := context.Background()

	// Effects are traced to their intention by memo, which is unique per
	// intention (a key reused after its retention names a new one).
	rows, err := e.db.Pool.Query(ctx, `SELECT id, scope, key, memo, amount FROM payments`)
	require.NoError(t, err)
	payments := map[int64]receipt{}
	paidMemo := map[string]int{}
	for rows.Next() {
		var r receipt
		var sc string
		require.NoError(t, rows.Scan(&r.ID, &sc, &r.Key, &r.Memo, &r.Amount))
		payments[r.ID] = r
		paidMemo[r.Memo]++
	}
	require.NoError(t, rows.Err())
	transfers, _ := e.bank.snapshot()
	byID := map[string]transfer{}
	movedMemo := map[string]int{}
	for _, tr := range transfers {
		byID[tr.ID] = tr
		movedMemo[tr.Memo]++
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	memos := map[string]bool{}
	unknown := 0
	for _, in := range ins {
		memos[in.req.Memo] = true
		resps, unk := e.responses[in.id()], e.unknown[in.id()]
		if unk > 0 {
			unknown++
			assert.Empty(t, resps, "%s: %s answered both success and outcome unknown", e.name, in.key)
		}
		settled := len(resps) > 0 || unk > 0
		if complete {
			assert.True(t, settled, "%s: intention %s never settled (first errors: %v)", e.name, in.key, e.firstErrs)
		}
		n := paidMemo[in.req.Memo]
		if in.kind == externalCall {
			n = movedMemo[in.req.Memo]
		}
		if complete && len(resps) > 0 {
			assert.Equal(t, 1, n, "%s: %s (%s) has %d effects", e.name, in.key, in.req.Memo, n)
		} else {
			assert.LessOrEqual(t, n, 1, "%s: %s (%s) has %d effects", e.name, in.key, in.req.Memo, n)
		}
		for _, r := range resps {
			switch in.kind {
			case atomicCall, inlineCall:
				got := r.(receipt)
				want := receipt{ID: got.ID, Key: in.key, Memo: in.req.Memo, Amount: in.req.Amount}
				assert.Equal(t, want, got, "%s: %s answered with another request's receipt", e.name, in.key)
				assert.Equal(t, want, payments[got.ID], "%s: %s answered success with payment %d, which is not in the table", e.name, in.key, got.ID)
			case externalCall:
				got := r.(payout)
				tr, ok := byID[got.TransferID]
				assert.True(t, ok, "%s: %s answered success with transfer %s, which the bank never made", e.name, in.key, got.TransferID)
				assert.Equal(t, transfer{ID: got.TransferID, Key: tr.Key, Memo: in.req.Memo, Amount: in.req.Amount}, tr,
					"%s: %s answered success with a transfer of another intention", e.name, in.key)
			}
		}
		for i := 1; i < len(resps); i++ {
			if !reflect.DeepEqual(resps[0], resps[i]) {
				t.Errorf("%s: %s answered differently: %+v then %+v", e.name, in.key, resps[0], resps[i])
				break
			}
		}
	}
	for _, p := range payments {
		assert.True(t, memos[p.Memo], "%s: payment %d (%s) belongs to no intention", e.name, p.ID, p.Memo)
	}
	for _, tr := range transfers {
		assert.True(t, memos[tr.Memo], "%s: transfer %s (%s) belongs to no intention", e.name, tr.ID, tr.Memo)
	}
	e.checkLinear(ins, payments, transfers)
	assert.Zero(t, e.fig.hung, "%s: calls did not return: %v", e.name, e.firstErrs["hung"])
	assert.Zero(t, e.fig.gaveUp, "%s: callers gave up after %s: %v", e.name, settleBound, e.firstErrs)
	assert.Zero(t, e.fig.errors["mismatch"], "%s: %v", e.name, e.firstErrs["mismatch"])
	e.fig.intentions = len(ins)
	e.fig.effects = len(payments) + len(transfers)
	e.fig.unknown = unknown
	e.fig.bodyRan = e.executed.Load()
}

// finish closes the scenario's pool and proxy, checks that no goroutine was
// left behind, and logs and records the figures.
func (e *env) finish() {
	t := e.t
	t.Helper()
	e.closePool()
	e.proxy.Stop()
	// goleak retries for about a second; closed connections may take a
	// little longer to wind down on a loaded machine.
	var leak error
	for range 20 {
		if leak = goleak.Find(e.leaks, goleak.IgnoreAnyFunction(postmasterWaiter), goleak.IgnoreAnyFunction(toxicStub),
			goleak.IgnoreAnyFunction(bgReader)); leak == nil {
			break
		}
	}
	if leak != nil {
		t.Errorf("%s: goroutines left behind: %v", e.name, leak)
	}
	e.mu.Lock()
	f := e.fig
	e.mu.Unlock()
	t.Logf("figures: %s: calls=%d ok=%d intentions=%d effects=%d outcome_unknown=%d bodies=%d replays=%d in_progress=%d errors={%s} max_latency=%s",
		f.name, f.calls, f.ok, f.intentions, f.effects, f.unknown, f.bodyRan, f.replays, f.inProgress, f.errorsText(), f.maxLatency.Round(time.Millisecond))
	if e.lateStack != "" {
		t.Logf("%d calls ran past their deadline; the first waited here:\n%s", f.late, e.lateStack)
	}
	for _, k := range sortedKinds(e.firstErrs) {
		t.Logf("first %s error: %v", k, e.firstErrs[k])
	}
	record(f)
}

func sortedKinds(m map[string]error) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// pictures is where failing histories' pictures go (a new temporary
// directory per scenario if empty).
var pictures = flag.String("faults.pictures", "", "write porcupine's pictures of non-linearizable histories to this directory")

// checkTimeout bounds the linearizability checker on one scenario's
// history; giving up fails the scenario.
const checkTimeout = 2 * time.Minute

// checkLinear reads the effects into the history, as the final read of each
// key, and checks it for linearizability (package linear); e.mu is held.
func (e *env) checkLinear(ins []intent, payments map[int64]receipt, transfers []transfer) {
	t := e.t
	t.Helper()
	res := checkHistory(t, e.name, e.history, ins, e.linKey, payments, transfers)
	e.fig.linear = res
	t.Logf("%s: %s", e.name, res)
	assert.NoError(t, res.Err(), "%s", e.name)
}

// checkHistory reads the effects into rec, as the final read of each key
// (the key of an effect's intention, by memo, keyOf), and checks its
// history for linearizability (package linear).
func checkHistory(t *testing.T, name string, rec *linear.Recorder, ins []intent, keyOf func(intent) string, payments map[int64]receipt, transfers []transfer) linear.Result {
	t.Helper()
	effects := map[string][]string{}
	owner := map[string]string{} // memo -> the history's key of its intention
	for _, in := range ins {
		owner[in.req.Memo] = keyOf(in)
	}
	memoKey := func(memo string) string {
		if k, ok := owner[memo]; ok {
			return k
		}
		return "no intention: " + memo
	}
	for _, p := range payments {
		effects[memoKey(p.Memo)] = append(effects[memoKey(p.Memo)], render(p))
	}
	for _, tr := range transfers {
		effects[memoKey(tr.Memo)] = append(effects[memoKey(tr.Memo)], render(tr))
	}
	rec.Observe(effects)
	res, err := linear.Check(name, rec.History(), *pictures, checkTimeout)
	require.NoError(t, err)
	assertLongOperations(t, name, res)
	return res
}

// longOperations is how many operations (calls recorded and one final read
// per key) every scenario's history has at least in the long mode.
const longOperations = 10000

// assertLongOperations asserts, in the long mode, that the history checked
// as res had at least longOperations operations.
func assertLongOperations(t *testing.T, name string, res linear.Result) {
	t.Helper()
	if *long {
		assert.GreaterOrEqual(t, res.Operations, longOperations, "%s: operations checked in the long mode", name)
	}
}
