package idemriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemriver"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// chargeArgs is the job: Ref is the business key a producer may send twice.
type chargeArgs struct {
	Ref     string `json:"ref"`
	Amount  int64  `json:"amount"`
	Decline bool   `json:"decline"`
}

func (chargeArgs) Kind() string { return "charge" }

var errDeclined = errors.New("card declined")

var chargeMethod = &idem.Method[int64]{Name: "Test.Charge",
	FinalErrors: []idem.FinalError{{Name: "errDeclined", Err: errDeclined}}}

func fingerprint(a chargeArgs) []byte {
	f := idem.NewFingerprinter("Test.Charge")
	f.Field("ref")
	f.String(a.Ref)
	f.Field("amount")
	f.Int(a.Amount)
	f.Field("decline")
	f.Bool(a.Decline)
	return f.Sum()
}

const effects = `CREATE TABLE effects (id bigserial PRIMARY KEY, ref text NOT NULL, amount bigint NOT NULL)`

// chargePgx and chargeSQL are what a generated ChargeInTx does: the body
// inserts one effect row.
func chargePgx(store *idem.Store) func(ctx context.Context, tx pgx.Tx, job *river.Job[chargeArgs]) error {
	return func(ctx context.Context, tx pgx.Tx, job *river.Job[chargeArgs]) error {
		_, err := idem.AtomicInTx(ctx, store, tx, chargeMethod, fingerprint(job.Args), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			if job.Args.Decline {
				return 0, errDeclined
			}
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO effects (ref, amount) VALUES ($1, $2) RETURNING id`, job.Args.Ref, job.Args.Amount).Scan(&id)
			return id, err
		})
		return err
	}
}

func chargeSQL(store *idem.Store) func(ctx context.Context, tx *sql.Tx, job *river.Job[chargeArgs]) error {
	return func(ctx context.Context, tx *sql.Tx, job *river.Job[chargeArgs]) error {
		_, err := idem.AtomicInTx(ctx, store, tx, chargeMethod, fingerprint(job.Args), func(ctx context.Context, tx *sql.Tx) (int64, error) {
			if job.Args.Decline {
				return 0, errDeclined
			}
			var id int64
			err := tx.QueryRowContext(ctx, `INSERT INTO effects (ref, amount) VALUES ($1, $2) RETURNING id`, job.Args.Ref, job.Args.Amount).Scan(&id)
			return id, err
		})
		return err
	}
}

// byRef keys a charge job by its business reference.
var byRef = idemriver.Config[chargeArgs]{
	Key:   func(job *river.Job[chargeArgs]) string { return "ref-" + job.Args.Ref },
	Final: idemriver.FinalErrors(errDeclined),
}

// env is a test database with River's schema and a client to insert with.
type env struct {
	db     *idemtest.DB
	insert func(ctx context.Context, args river.JobArgs) (int64, error)
}

// retryNow retries a failed job at once, so tests wait for no backoff.
type retryNow struct{}

func (retryNow) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

func riverConfig(workers *river.Workers) *river.Config {
	return &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:              workers,
		FetchPollInterval:    20 * time.Millisecond,
		FetchCooldown:        5 * time.Millisecond,
		RetryPolicy:          retryNow{},
		TestOnly:             true,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		RescueStuckJobsAfter: time.Hour,
	}
}

// startPgx migrates River's schema into a fresh database and starts a
// riverpgxv5 client working the jobs worker takes.
func startPgx[T river.JobArgs](t *testing.T, worker func(db *idemtest.DB) river.Worker[T]) *env {
	t.Helper()
	db := idemtest.New(t, idemtest.WithSetup(effects))
	ctx := t.Context()
	driver := riverpgxv5.New(db.Pool)
	m, err := rivermigrate.New(driver, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, worker(db))
	client, err := river.NewClient(driver, riverConfig(workers))
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() { _ = client.StopAndCancel(context.Background()) })
	return &env{db: db, insert: func(ctx context.Context, args river.JobArgs) (int64, error) {
		r, err := client.Insert(ctx, args, nil)
		if err != nil {
			return 0, err
		}
		return r.Job.ID, nil
	}}
}

// startSQL is startPgx on the database/sql driver.
func startSQL[T river.JobArgs](t *testing.T, worker func(db *idemtest.DB) river.Worker[T]) *env {
	t.Helper()
	db := idemtest.New(t, idemtest.WithSetup(effects))
	ctx := t.Context()
	driver := riverdatabasesql.New(db.SQL)
	m, err := rivermigrate.New(driver, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, worker(db))
	client, err := river.NewClient(driver, riverConfig(workers))
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() { _ = client.StopAndCancel(context.Background()) })
	return &env{db: db, insert: func(ctx context.Context, args river.JobArgs) (int64, error) {
		r, err := client.Insert(ctx, args, nil)
		if err != nil {
			return 0, err
		}
		return r.Job.ID, nil
	}}
}

// job is a job row as the tests read it.
type job struct {
	State   string
	Attempt int
	Errors  []string
	Snoozes int
}

// wait returns the job's row once pred holds, failing the test after a minute.
func (e *env) wait(t *testing.T, id int64, pred func(job) bool) job {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var j job
		err := e.db.Pool.QueryRow(t.Context(), `SELECT state::text, attempt,
			coalesce((SELECT array_agg(e->>'error') FROM unnest(errors) e), '{}'),
			coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE id = $1`, id).Scan(&j.State, &j.Attempt, &j.Errors, &j.Snoozes)
		require.NoError(t, err)
		if pred(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: still %+v after a minute", id, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ended(j job) bool {
	return j.State == "completed" || j.State == "cancelled" || j.State == "discarded"
}

func (e *env) effects(t *testing.T, ref string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM effects WHERE ref = $1`, ref).Scan(&n))
	return n
}

// drivers runs a test on both River drivers, with the matching store and
// atomic worker; atomKeyed is atom for a wrapper generated with
// -key=args.Ref.
var drivers = map[string]struct {
	start     func(t *testing.T, worker func(db *idemtest.DB) river.Worker[chargeArgs]) *env
	atom      func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs]
	atomKeyed func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs]
}{
	"pgx": {startPgx[chargeArgs], func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs] {
		return idemriver.Atomic(db.Pool, cfg, chargePgx(pgxStore(db)))
	}, func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs] {
		return idemriver.Atomic(db.Pool, cfg, withRefKey(chargePgx(pgxStore(db))))
	}},
	"database/sql": {startSQL[chargeArgs], func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs] {
		return idemriver.AtomicSQL(db.SQL, cfg, chargeSQL(sqlStore(db)))
	}, func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs] {
		return idemriver.AtomicSQL(db.SQL, cfg, withRefKey(chargeSQL(sqlStore(db))))
	}},
}

func pgxStore(db *idemtest.DB) *idem.Store {
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}
	return store
}

func sqlStore(db *idemtest.DB) *idem.Store {
	store, err := idem.NewSQLStore(db.SQL)
	if err != nil {
		panic(err)
	}
	return store
}

// withRefKey makes call a wrapper generated with -key=args.Ref: its first
// line puts the field in the context unless a key is there already.
func withRefKey[TTx any](call func(context.Context, TTx, *river.Job[chargeArgs]) error) func(context.Context, TTx, *river.Job[chargeArgs]) error {
	return func(ctx context.Context, tx TTx, job *river.Job[chargeArgs]) error {
		return call(idem.ContextWithDefaultKey(ctx, job.Args.Ref), tx, job)
	}
}

// One event inserted as two jobs: with the default Config a wrapper
// generated with -key is keyed by its field, so the second job replays; a
// wrapper without -key is keyed by the job's ID, and both jobs run it.
func TestDefaultConfigKeysByTheRequestField(t *testing.T) {
	for name, d := range drivers {
		for _, c := range []struct {
			name    string
			worker  func(db *idemtest.DB, cfg idemriver.Config[chargeArgs]) river.Worker[chargeArgs]
			effects int
		}{
			{"wrapper with -key", d.atomKeyed, 1},
			{"wrapper without -key", d.atom, 2},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] {
					return c.worker(db, idemriver.Config[chargeArgs]{})
				})
				for range 2 {
					id, err := e.insert(t.Context(), chargeArgs{Ref: "evt-1", Amount: 500})
					require.NoError(t, err)
					assert.Equal(t, "completed", e.wait(t, id, ended).State)
				}
				assert.Equal(t, c.effects, e.effects(t, "evt-1"))
			})
		}
	}
}

// Config.Key wins over the wrapper's -key field.
func TestConfigKeyWinsOverTheRequestField(t *testing.T) {
	d := drivers["pgx"]
	e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] {
		return d.atomKeyed(db, idemriver.Config[chargeArgs]{Key: idemriver.JobIDKey[chargeArgs]})
	})
	for range 2 {
		id, err := e.insert(t.Context(), chargeArgs{Ref: "evt-2", Amount: 500})
		require.NoError(t, err)
		assert.Equal(t, "completed", e.wait(t, id, ended).State)
	}
	assert.Equal(t, 2, e.effects(t, "evt-2"))
}

func TestAtomicTwoJobsOneKeyOneEffect(t *testing.T) {
	for name, d := range drivers {
		t.Run(name, func(t *testing.T) {
			e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] { return d.atom(db, byRef) })
			first, err := e.insert(t.Context(), chargeArgs{Ref: "r1", Amount: 500})
			require.NoError(t, err)
			assert.Equal(t, "completed", e.wait(t, first, ended).State)
			second, err := e.insert(t.Context(), chargeArgs{Ref: "r1", Amount: 500})
			require.NoError(t, err)
			assert.Equal(t, "completed", e.wait(t, second, ended).State, "a replay completes the job")
			assert.Equal(t, 1, e.effects(t, "r1"))
		})
	}
}

// crashAfter returns the worker's error, or a crash once the work
// committed: River would retry the job unless its completion committed
// with the work.
type crashAfter struct {
	river.WorkerDefaults[chargeArgs]
	inner river.Worker[chargeArgs]
}

func (c crashAfter) Work(ctx context.Context, job *river.Job[chargeArgs]) error {
	if err := c.inner.Work(ctx, job); err != nil {
		return err
	}
	return errors.New("worker lost after commit")
}

func TestAtomicJobCompletesInTheMethodsTransaction(t *testing.T) {
	for name, d := range drivers {
		t.Run(name, func(t *testing.T) {
			e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] {
				return crashAfter{inner: d.atom(db, idemriver.Config[chargeArgs]{})}
			})
			id, err := e.insert(t.Context(), chargeArgs{Ref: "r2", Amount: 700})
			require.NoError(t, err)
			j := e.wait(t, id, ended)
			assert.Equal(t, "completed", j.State)
			assert.Equal(t, 1, j.Attempt, "never retried")
			assert.Equal(t, 1, e.effects(t, "r2"))
		})
	}
}

func TestAtomicMismatchCancels(t *testing.T) {
	for name, d := range drivers {
		t.Run(name, func(t *testing.T) {
			e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] { return d.atom(db, byRef) })
			first, err := e.insert(t.Context(), chargeArgs{Ref: "r3", Amount: 500})
			require.NoError(t, err)
			e.wait(t, first, ended)
			other, err := e.insert(t.Context(), chargeArgs{Ref: "r3", Amount: 900})
			require.NoError(t, err)
			j := e.wait(t, other, ended)
			assert.Equal(t, "cancelled", j.State)
			require.Len(t, j.Errors, 1)
			assert.Contains(t, j.Errors[0], "was first used with request")
			assert.Equal(t, 1, e.effects(t, "r3"))
		})
	}
}

func TestAtomicFinalErrorCancelsAndIsReplayed(t *testing.T) {
	for name, d := range drivers {
		t.Run(name, func(t *testing.T) {
			// Without Final, the first attempt rolls back and is retried;
			// with it the stored error commits and the job is cancelled.
			for _, cfg := range []idemriver.Config[chargeArgs]{byRef, {Key: byRef.Key}} {
				e := d.start(t, func(db *idemtest.DB) river.Worker[chargeArgs] { return d.atom(db, cfg) })
				args := chargeArgs{Ref: "r4", Amount: 500, Decline: true}
				first, err := e.insert(t.Context(), args)
				require.NoError(t, err)
				j := e.wait(t, first, ended)
				if cfg.Final != nil {
					assert.Equal(t, "cancelled", j.State)
					assert.Equal(t, 1, j.Attempt)
					assert.Contains(t, j.Errors[0], "final error: card declined")
					second, err := e.insert(t.Context(), args)
					require.NoError(t, err)
					j = e.wait(t, second, ended)
					assert.Equal(t, "cancelled", j.State, "the stored error is replayed and cancels")
					assert.Contains(t, j.Errors[0], "card declined")
				} else {
					assert.NotEqual(t, "completed", j.State)
				}
				assert.Equal(t, 0, e.effects(t, "r4"))
			}
		})
	}
}

// mailArgs is an external job: send one email through a provider.
type mailArgs struct {
	To string `json:"to"`
}

func (mailArgs) Kind() string { return "mail" }

var mailMethod = &idem.Method[string]{Name: "Test.Mail", LockTimeout: 3 * time.Second}

// provider is a fake email provider deduplicating by its own key.
type provider struct {
	mu    sync.Mutex
	calls []string // the downstream key of each call
}

func (p *provider) send(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, key)
	return fmt.Sprintf("msg-%d", len(p.calls))
}

func (p *provider) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func mailFP(a mailArgs) []byte {
	f := idem.NewFingerprinter("Test.Mail")
	f.Field("to")
	f.String(a.To)
	return f.Sum()
}

func TestExternalKeepsStepsAcrossRetries(t *testing.T) {
	var p provider
	var attempts atomic.Int32
	var keys sync.Map
	e := startPgx(t, func(db *idemtest.DB) river.Worker[mailArgs] {
		store, err := idem.NewStore(db.Pool)
		require.NoError(t, err)
		return idemriver.External(idemriver.Config[mailArgs]{}, func(ctx context.Context, job *river.Job[mailArgs]) error {
			_, err := idem.External(ctx, store, mailMethod, mailFP(job.Args), func(ctx context.Context) (string, error) {
				n := attempts.Add(1)
				keys.Store(n, idem.DownstreamKey(ctx, "send"))
				id, err := idem.Step(ctx, "send", func(ctx context.Context) (string, error) {
					return p.send(idem.DownstreamKey(ctx, "send")), nil
				})
				if n == 1 {
					return "", errors.New("connection reset after the send")
				}
				return id, err
			})
			return err
		})
	})
	id, err := e.insert(t.Context(), mailArgs{To: "a@example.com"})
	require.NoError(t, err)
	j := e.wait(t, id, ended)
	assert.Equal(t, "completed", j.State)
	assert.Equal(t, 2, j.Attempt)
	assert.Len(t, p.all(), 1, "the step ran once across River's retry")
	k1, _ := keys.Load(int32(1))
	k2, _ := keys.Load(int32(2))
	assert.Equal(t, k1, k2, "one downstream key across retries")
}

func TestExternalInProgressSnoozes(t *testing.T) {
	var p provider
	release, started := make(chan struct{}), make(chan struct{}, 2)
	key := idemriver.Config[mailArgs]{Key: func(job *river.Job[mailArgs]) string { return "to-" + job.Args.To }}
	e := startPgx(t, func(db *idemtest.DB) river.Worker[mailArgs] {
		store, err := idem.NewStore(db.Pool)
		require.NoError(t, err)
		return idemriver.External(key, func(ctx context.Context, job *river.Job[mailArgs]) error {
			_, err := idem.External(ctx, store, mailMethod, mailFP(job.Args), func(ctx context.Context) (string, error) {
				started <- struct{}{}
				<-release
				return p.send(idem.DownstreamKey(ctx, "send")), nil
			})
			return err
		})
	})
	first, err := e.insert(t.Context(), mailArgs{To: "b@example.com"})
	require.NoError(t, err)
	<-started
	second, err := e.insert(t.Context(), mailArgs{To: "b@example.com"})
	require.NoError(t, err)
	j := e.wait(t, second, func(j job) bool { return j.Snoozes > 0 })
	assert.Empty(t, j.Errors, "a snooze is no failure")
	assert.NotEqual(t, "completed", j.State)
	close(release)
	assert.Equal(t, "completed", e.wait(t, first, ended).State)
	assert.Equal(t, "completed", e.wait(t, second, ended).State, "the snoozed twin replays")
	assert.Len(t, p.all(), 1)
}
