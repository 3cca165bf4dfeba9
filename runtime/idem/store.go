package idem

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Defaults used when a Store or Method does not say otherwise.
const (
	DefaultRetention   = 24 * time.Hour
	DefaultLockTimeout = time.Minute
	DefaultMaxAttempts = 5
	// MinRetention is the shortest retention window a store or method may
	// use: a window shorter than the time a client takes to retry makes
	// the retry a new request.
	MinRetention = time.Minute
)

// Event describes one thing an idempotent call did, for hooks.
type Event struct {
	Method      string
	Scope       string
	Key         string
	Fingerprint []byte
	Fence       int64         // fencing token of the claim (external mode)
	Duration    time.Duration // time the body ran (Executed) or the sweep took (Swept)
	Rows        int64         // rows deleted (Swept)
	Err         error         // the body's error (Executed), if any
}

// Hooks are called synchronously as calls progress. Any may be nil. They are
// meant for metrics and tests and must be quick and must not panic.
type Hooks struct {
	Claimed    func(context.Context, Event) // the body is about to run: external and inline modes, the key is claimed; atomic mode, before every run of the body, which a first attempt starts without looking its key up (a retry's or a twin's body may run too: the first to record the key commits, see Atomic)
	Executed   func(context.Context, Event) // the method body ran (whatever it returned, and whether or not its work then committed)
	Replayed   func(context.Context, Event) // a stored response was returned (atomic mode: also to a call whose body ran and lost to a twin)
	Mismatch   func(context.Context, Event) // the key was reused with a different request
	InProgress func(context.Context, Event) // another attempt holds the key
	TakenOver  func(context.Context, Event) // an expired or abandoned claim was taken over
	LockLost   func(context.Context, Event) // a finalise found its claim taken over
	Swept      func(context.Context, Event) // a sweep batch deleted rows
}

type config struct {
	table       string
	retention   time.Duration
	lockTimeout time.Duration
	logger      *slog.Logger
	hooks       Hooks
	clock       func() time.Time
	keys        KeyPolicy
	maxAttempts int
	baseBackoff time.Duration
	heartbeat   time.Duration
	txPooling   bool
	finalise    time.Duration
	claimWait   time.Duration
	sweepShare  float64
	// noKeyLock leaves the key's lock out (keylock.go): the runtime before
	// it, which the rolling-upgrade test runs beside today's. Tests only.
	noKeyLock bool
	// lookupFirst: every atomic call looks its key up before its body
	// (WithLookupFirst, hint.go).
	lookupFirst bool
}

// Option configures a Store.
type Option func(*config)

// WithTable sets the ledger table (default "idempotency_keys"); it may be
// schema-qualified. It must match the table the migrations create.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithRetention sets the default retention window for methods that do not set
// their own. A key sent after the window is treated as new. It must be at
// least MinRetention and at least the lock timeout (NewStore refuses less).
func WithRetention(d time.Duration) Option { return func(c *config) { c.retention = d } }

// WithLockTimeout sets the default in-progress lock for external methods. It
// must be positive and at most the retention window.
func WithLockTimeout(d time.Duration) Option { return func(c *config) { c.lockTimeout = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithHooks sets the hooks called as calls progress.
func WithHooks(h Hooks) Option { return func(c *config) { c.hooks = h } }

// WithClock makes the store read time from clock instead of the database's
// now(). Production code should leave the database clock in charge (one clock
// for every application server); tests use it to step past a retention window
// or lock timeout without sleeping.
func WithClock(clock func() time.Time) Option { return func(c *config) { c.clock = clock } }

// WithKeyPolicy replaces DefaultKeyPolicy.
func WithKeyPolicy(p KeyPolicy) Option { return func(c *config) { c.keys = p } }

// WithMaxAttempts bounds how many times a transaction that failed with a
// serialization failure (40001) or deadlock (40P01), or whose COMMIT outcome
// is unknown, is tried in all (default 5; at least 1).
func WithMaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = n } }

// WithBackoff sets the base delay between such attempts (default 10ms); the
// delay doubles per attempt, is capped at 1s and is jittered. It must be
// positive.
func WithBackoff(base time.Duration) Option { return func(c *config) { c.baseBackoff = base } }

// WithHeartbeat makes external-mode attempts extend their lock every interval
// while the body runs (0, the default, disables it). Pick an interval well
// under the lock timeout (NewStore refuses one that is not shorter). Each
// extension pushes the row's retention window out with the lock when needed,
// so a live call is never treated as expired. If an extension finds the
// claim taken over, the
// body's context is cancelled with ErrLockLost as its cause.
func WithHeartbeat(interval time.Duration) Option { return func(c *config) { c.heartbeat = interval } }

// DefaultFinaliseTimeout bounds the database calls that must happen even if
// the caller's context has ended, so run detached from it: the ledger writes
// made after an external-mode body ran (storing its outcome, recording a
// step, releasing the key), the rollback of an atomic or inline attempt's
// transaction, and the undo of a claim's savepoint inside a caller's
// transaction (AtomicInTx, InlineInTx). A COMMIT that carries a claim or an
// outcome (atomic and inline mode's COMMIT, external mode's claim) is not
// cancelled when the caller's context ends, which would leave it committed
// on the primary but perhaps not on a synchronous standby: it gets this long
// after that, and one cut off then is ErrOutcomeNotRecorded (see
// NoticeHandler). A call can return this much later than its deadline,
// never more; a rollback that does not finish in time closes its
// connection, so the server ends the transaction.
const DefaultFinaliseTimeout = 10 * time.Second

// WithFinaliseTimeout replaces DefaultFinaliseTimeout. It must be positive.
func WithFinaliseTimeout(d time.Duration) Option { return func(c *config) { c.finalise = d } }

// DefaultClaimWait bounds how long an atomic claim waits on a key that a
// concurrent attempt has claimed but not yet committed (a twin blocks on the
// ledger's unique index until the holder's transaction ends). A twin still
// waiting when it runs out gets an *InProgressError (the HTTP layer answers
// 409 with Retry-After) and gives its pooled connection back: a holder that
// is slow, stuck or cut off by the network can never tie up the pool with
// its twins.
const DefaultClaimWait = 5 * time.Second

// WithClaimWait replaces DefaultClaimWait. It must be at least a millisecond
// (PostgreSQL's lock_timeout, which enforces it, counts milliseconds) and at
// most 24h. A twin whose holder commits within the wait replays its answer;
// pick a wait above the time your atomic methods take, and under your
// callers' deadlines. The wait applies to the claim statement only (atomic
// mode: the record statement, which waits on a twin's row not yet
// committed): the method body runs with the connection's own lock_timeout.
func WithClaimWait(d time.Duration) Option { return func(c *config) { c.claimWait = d } }

// DefaultSweepShare is the share of its running time a sweep spends
// deleting: after each full batch it pauses for the batch's own time times
// (1-share)/share, so a batch that deletes slowly, because the server is
// busy, makes the pause longer too. A sweep flat out competes with live
// claims for the server's CPU and I/O: measured with internal/bench
// (-run sweep, a million expired rows, live claims from 4 goroutines
// saturating a 2-core machine), flat out took 30 s and raised the live p99
// 2.35 times; at a share of 0.25 it took 3m28s and raised it 1.37 to 1.52
// times (against the live claims' p99 just before and just after the
// sweep); at this share it took 7m44s and raised it 1.02 times against the
// window after it (1.35 against the one before, on a ledger 2.5M rows
// smaller). Even so it deletes some 2,000 rows a second on that saturated
// machine; raise the share where expired rows come faster than that.
// Expired rows do not need the sweep to be reused: a claim takes over an
// expired key itself; the sweep only gives the space back.
const DefaultSweepShare = 0.1

// WithSweepShare replaces DefaultSweepShare: the share of a sweep's running
// time spent deleting, above 0 and at most 1 (1: no pause, as fast as the
// server allows). It paces Sweep, SweepInline and the Janitor.
func WithSweepShare(share float64) Option { return func(c *config) { c.sweepShare = share } }

// Store is the ledger. It is safe for concurrent use.
type Store struct {
	exec   executor // statements of their own, on pool or db (executor.go)
	drv    any      // the attempts' driver: pgxDriver or sqlDriver (driver.go, dispatch.go)
	pool   Pool     // NewStore's; nil for NewSQLStore's
	db     *sql.DB  // NewSQLStore's; nil for NewStore's
	cfg    config
	ledger Ledger
	q      ledger.Statements // the ledger's statements by the store's clock
	recent *recentDurations  // body durations per method, for RetryAfter
	inline *inlineSweepers   // inline methods the janitor sweeps (RegisterInline)
	// recording bounds the mismatches recorded after the answer
	// (recordMismatchBehind); records counts them until they end.
	recording chan struct{}
	records   sync.WaitGroup
	// pause waits between sweep batches; tests replace it.
	pause func(ctx context.Context, d time.Duration) error
	// citus is what the store knows of the server: citusUnknown until a
	// first atomic call or mismatch record asks (onCitus).
	citus atomic.Int32
	// replays are the methods' recent replay rates: whether an atomic
	// call looks its key up before its body (hint.go).
	replays replayRates
}

// newStore applies and checks opts (check adds the constructor's own
// checks) and returns a store with no connections yet.
func newStore(opts []Option, check func(config) error) (*Store, error) {
	cfg := config{
		table:       DefaultTable,
		retention:   DefaultRetention,
		lockTimeout: DefaultLockTimeout,
		keys:        DefaultKeyPolicy,
		maxAttempts: DefaultMaxAttempts,
		baseBackoff: 10 * time.Millisecond,
		finalise:    DefaultFinaliseTimeout,
		claimWait:   DefaultClaimWait,
		sweepShare:  DefaultSweepShare,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := check(cfg); err != nil {
		return nil, err
	}
	l, err := LedgerSchema(cfg.table)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, ledger: l, q: l.Statements(cfg.ledgerClock()), recent: &recentDurations{}, inline: &inlineSweepers{},
		recording: make(chan struct{}, maxRecording), pause: sleepCtx}, nil
}

func (c config) validate() error {
	switch {
	case c.lockTimeout <= 0:
		return fmt.Errorf("lock timeout %s must be positive", c.lockTimeout)
	case c.retention < MinRetention:
		return fmt.Errorf("retention %s is under the minimum of %s", c.retention, MinRetention)
	case c.retention < c.lockTimeout:
		return fmt.Errorf("retention %s is shorter than the lock timeout %s: a call still holding its key could be treated as new", c.retention, c.lockTimeout)
	case c.maxAttempts < 1:
		return fmt.Errorf("max attempts %d must be at least 1", c.maxAttempts)
	case c.baseBackoff <= 0:
		return fmt.Errorf("backoff %s must be positive", c.baseBackoff)
	case c.finalise <= 0:
		return fmt.Errorf("finalise timeout %s must be positive", c.finalise)
	case c.claimWait < time.Millisecond || c.claimWait > 24*time.Hour:
		return fmt.Errorf("claim wait %s must be between 1ms and 24h", c.claimWait)
	case !(c.sweepShare > 0 && c.sweepShare <= 1):
		return fmt.Errorf("sweep share %g must be above 0 and at most 1", c.sweepShare)
	case c.heartbeat < 0 || c.heartbeat > 0 && c.heartbeat >= c.lockTimeout:
		return fmt.Errorf("heartbeat %s must be 0 (off) or shorter than the lock timeout %s", c.heartbeat, c.lockTimeout)
	}
	return nil
}

// Ledger returns the schema of the store's ledger table.
func (s *Store) Ledger() Ledger { return s.ledger }

// now returns the clock's time, or nil to let the database use now().
func (s *Store) now() any {
	if s.cfg.clock == nil {
		return nil
	}
	return s.cfg.clock()
}

// at returns the arguments of a statement that needs the time (queries):
// the store's clock's time before args (WithClock), or args alone, the
// statement reading the database's now().
func (s *Store) at(args ...any) []any {
	if s.cfg.clock == nil {
		return args
	}
	return append([]any{s.cfg.clock()}, args...)
}

// Method describes one idempotent method. Generated code declares one per
// annotated method; it is read-only after creation.
type Method[R any] struct {
	// Name identifies the method in the ledger, e.g. "Payments.Charge".
	// Renaming it orphans its stored keys.
	Name string
	// Retention is how long a key is remembered; 0 uses the store's default.
	// At least MinRetention, and for external methods at least the lock
	// timeout: a call is refused otherwise.
	Retention time.Duration
	// LockTimeout is how long an external-mode claim blocks a retry before it
	// may be taken over; 0 uses the store's default.
	LockTimeout time.Duration
	// FinalErrors are sentinel errors that are stored and replayed like a
	// response (errors.Is holds on replay). Any other error releases the key
	// so that a retry runs the method again.
	FinalErrors []FinalError
	// Encode and Decode store and restore the response. nil means
	// encoding/json, which generated code uses for types it has checked to
	// round-trip; it refuses a NaN or infinite float and a string that is
	// not valid UTF-8 rather than store something else. Every caller, the
	// first included, gets the response decoded from the stored bytes, so
	// a replay is reflect.DeepEqual to the first answer.
	Encode func(R) ([]byte, error)
	Decode func([]byte) (R, error)
}

// FinalError names a sentinel error declared final for a method.
type FinalError struct {
	Name string // the Go identifier, stored in the ledger
	Err  error
}

// sleepCtx waits for d, or returns ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// inlineSweepers are the inline-mode methods registered with a store
// (RegisterInline), swept by its janitor after the ledger. Safe for
// concurrent use.
type inlineSweepers struct {
	mu    sync.Mutex
	names []string // registration order, the order sweeps run in
	sweep map[string]func(ctx context.Context, batch int) (int64, error)
}

// maxRecording is how many mismatches a store records at once in the
// background (AtomicInTx, AtomicSQLInTx).
const maxRecording = 2

// WithTransactionPooling says that the pool's connections go through a pooler
// in transaction mode (PgBouncer's pool_mode = transaction, or one like it),
// where consecutive transactions of one client connection may run on
// different server connections. NewStore then refuses a pool whose default
// query mode keeps prepared statements on the server connection
// (pgx.QueryExecModeCacheStatement, pgx's default, and
// pgx.QueryExecModeDescribeExec): a statement prepared on one server
// connection is missing on the next. pgx.QueryExecModeExec,
// pgx.QueryExecModeSimpleProtocol and pgx.QueryExecModeCacheDescribe work.
//
// A pooler that keeps prepared statements itself (PgBouncer 1.21 or later
// with max_prepared_statements above 0) needs no such restriction: leave the
// option out for it.
//
// The check reads the pool's configuration through its Config method
// (*pgxpool.Pool has one); a Pool without one is refused, since its mode
// cannot be checked.
func WithTransactionPooling() Option { return func(c *config) { c.txPooling = true } }

// ledgerClock is the clock the store's statements read the time from: the
// store's, with WithClock, or the database's.
func (c config) ledgerClock() ledger.Clock {
	if c.clock != nil {
		return ledger.StoreClock
	}
	return ledger.DatabaseClock
}
