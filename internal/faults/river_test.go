package faults

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemriver"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The River worker: the test binary run again as a River client working
// the scenario's jobs, so that it can be killed with SIGKILL mid-batch.
const (
	riverWorkerEnv   = "FAULTS_RIVER_WORKER"   // set: run as a River worker, not as tests
	riverProviderEnv = "FAULTS_RIVER_PROVIDER" // URL of the email provider, served by the test
)

// riverCharge is an atomic job: its effect is a row written in the
// method's transaction, which also completes the job.
type riverCharge struct {
	Ref    string `json:"ref"`
	Amount int64  `json:"amount"`
}

func (riverCharge) Kind() string { return "fault_charge" }

// riverEmail is an external job: its effect is a send at the provider,
// with a downstream key, recorded as a step.
type riverEmail struct {
	Ref string `json:"ref"`
}

func (riverEmail) Kind() string { return "fault_email" }

var (
	riverChargeMethod = &idem.Method[int64]{Name: "Faults.RiverCharge"}
	riverEmailMethod  = &idem.Method[string]{Name: "Faults.RiverEmail"}
)

func riverFP(method, ref string) []byte {
	f := idem.NewFingerprinter(method)
	f.Field("ref")
	f.String(ref)
	return f.Sum()
}

// retrySoon retries a failed job 100ms later.
type retrySoon struct{}

func (retrySoon) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(100 * time.Millisecond)
}

// riverWorkerMain works the scenario's jobs until it is killed.
func riverWorkerMain() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(workerDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, "river worker:", err)
		return 2
	}
	defer pool.Close()
	store, err := idem.NewStore(pool, idem.WithLockTimeout(lockTimeout), idem.WithHeartbeat(lockTimeout/4),
		idem.WithHooks(idem.Hooks{Executed: func(ctx context.Context, _ idem.Event) { markRan(ctx) }}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "river worker:", err)
		return 2
	}
	provider := os.Getenv(riverProviderEnv)
	emit := riverEmitter()
	workers := river.NewWorkers()
	river.AddWorker(workers, recordJobs(emit, riverChargeMethod.Name, func(a riverCharge) string { return a.Ref },
		idemriver.Atomic(pool, idemriver.Config[riverCharge]{
			Key: func(job *river.Job[riverCharge]) string { return "charge-" + job.Args.Ref },
		}, func(ctx context.Context, tx pgx.Tx, job *river.Job[riverCharge]) error {
			id, err := idem.AtomicInTx(ctx, store, tx, riverChargeMethod, riverFP(riverChargeMethod.Name, job.Args.Ref), func(ctx context.Context, tx pgx.Tx) (int64, error) {
				var id int64
				err := tx.QueryRow(ctx, `INSERT INTO river_effects (ref) VALUES ($1) RETURNING id`, job.Args.Ref).Scan(&id)
				return id, err
			})
			answered(ctx, renderRiverCharge(id, job.Args.Ref))
			return err
		})))
	river.AddWorker(workers, recordJobs(emit, riverEmailMethod.Name, func(a riverEmail) string { return a.Ref },
		idemriver.External(idemriver.Config[riverEmail]{
			Key: func(job *river.Job[riverEmail]) string { return "email-" + job.Args.Ref },
		}, func(ctx context.Context, job *river.Job[riverEmail]) error {
			msg, err := idem.External(ctx, store, riverEmailMethod, riverFP(riverEmailMethod.Name, job.Args.Ref), func(ctx context.Context) (string, error) {
				return idem.Step(ctx, "send", func(ctx context.Context) (string, error) {
					return sendEmail(ctx, provider, idem.DownstreamKey(ctx, "send"), job.Args.Ref)
				})
			})
			answered(ctx, msg)
			return err
		})))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 16}},
		Workers:              workers,
		FetchPollInterval:    50 * time.Millisecond,
		FetchCooldown:        20 * time.Millisecond,
		JobTimeout:           5 * time.Second,
		RescueStuckJobsAfter: 5 * time.Second,
		RetryPolicy:          retrySoon{},
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "river worker:", err)
		return 2
	}
	select {} // until killed
}

// sendEmail posts one send to the provider.
func sendEmail(ctx context.Context, url, key, ref string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?key="+key+"&ref="+ref, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("provider: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider: %s %w", resp.Status, err)
	}
	return string(b), nil
}

// riverFigures are the counts of the River scenario.
type riverFigures struct {
	jobs, chargeEffects, emailEffects, completed, cancelled, pending int
	duplicateEffects, repeatedCalls, kills                           int
}

// TestRiverWorkerKilled works N River jobs (half atomic, half external) in
// a worker process killed with SIGKILL mid-batch, at the worst moment for
// an external job (the provider has sent the email, the worker never hears
// so), then restarted. River rescues the jobs the dead worker held, the
// ledger takes over its claims: every job has one effect, none is left
// pending, and the sends the kill interrupted are made again with the same
// downstream key, so the provider deduplicates them; no other is repeated.
// The history of the jobs' calls, the effects read into it, is
// linearizable (checkRiverHistory).
func TestRiverWorkerKilled(t *testing.T) {
	n := size(100, 10000)
	db := idemtest.New(t, idemtest.WithSetup(`CREATE TABLE river_effects (id bigserial PRIMARY KEY, ref text NOT NULL)`))
	ctx := t.Context()
	driver := riverpgxv5.New(db.Pool)
	m, err := rivermigrate.New(driver, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	inserter, err := river.NewClient(driver, &river.Config{})
	require.NoError(t, err)
	var params []river.InsertManyParams
	for i := range n {
		ref := fmt.Sprintf("r%04d", i)
		if i%2 == 0 {
			params = append(params, river.InsertManyParams{Args: riverCharge{Ref: ref, Amount: int64(i + 1)}})
		} else {
			params = append(params, river.InsertManyParams{Args: riverEmail{Ref: ref}})
		}
	}
	_, err = inserter.InsertMany(ctx, params)
	require.NoError(t, err)

	var mu sync.Mutex
	sends := map[string]int{}            // downstream key → sends
	refs := map[string]map[string]bool{} // ref → downstream keys sent
	calls := 0
	atProvider := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ref := r.URL.Query().Get("key"), r.URL.Query().Get("ref")
		mu.Lock()
		calls++
		sends[key]++
		if refs[ref] == nil {
			refs[ref] = map[string]bool{}
		}
		refs[ref][key] = true
		hold := calls == n/8
		mu.Unlock()
		if hold { // the email went out; the worker dies before it hears so
			close(atProvider)
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "msg-"+key)
	}))
	defer srv.Close()

	var (
		linesMu sync.Mutex
		lines   []riverLine // what the workers printed, for the history
	)
	// start starts a worker; its exited channel gets Wait's error once
	// everything it printed was read.
	start := func() (*exec.Cmd, <-chan error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), riverWorkerEnv+"=1", workerDB+"="+db.URL, riverProviderEnv+"="+srv.URL)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() {
			readRiverLines(stdout, &linesMu, &lines)
			exited <- cmd.Wait()
		}()
		return cmd, exited
	}
	fig := riverFigures{jobs: n}
	first, exited := start()
	select {
	case <-atProvider:
	case err := <-exited:
		t.Fatalf("the worker exited before the kill: %v", err)
	case <-time.After(time.Duration(size(2, 10)) * time.Minute):
		_ = first.Process.Kill()
		t.Fatalf("the worker sent fewer than %d emails in %d minutes", n/8, size(2, 10))
	}
	require.NoError(t, first.Process.Kill()) // SIGKILL
	<-exited
	mu.Lock()
	beforeKill := map[string]bool{} // the keys the killed worker sent
	for k := range sends {
		beforeKill[k] = true
	}
	mu.Unlock()
	fig.kills++
	var committed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_effects`).Scan(&committed))
	t.Logf("killed the worker after %d atomic effects committed and %d sends", committed, n/8)

	second, secondExited := start()
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { _ = second.Process.Kill(); <-secondExited }) }
	defer stop()
	deadline := time.Now().Add(time.Duration(size(3, 20)) * time.Minute)
	for {
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&fig.pending))
		if fig.pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state IN ('cancelled', 'discarded')) FROM river_job`).Scan(&fig.completed, &fig.cancelled))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT ref) FROM river_effects`).Scan(&fig.chargeEffects, &fig.duplicateEffects))
	charges := map[string][]string{} // ref → its rows, rendered
	rows, err := db.Pool.Query(ctx, `SELECT id, ref FROM river_effects`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var ref string
		require.NoError(t, rows.Scan(&id, &ref))
		charges[ref] = append(charges[ref], renderRiverCharge(id, ref))
	}
	require.NoError(t, rows.Err())
	stop() // every line the worker printed is read
	mu.Lock()
	fig.emailEffects = len(sends) // the provider sends once per key
	var repeatedAfterRestart []string
	for k, c := range sends {
		fig.repeatedCalls += c - 1
		if c > 1 && !beforeKill[k] {
			repeatedAfterRestart = append(repeatedAfterRestart, k)
		}
	}
	emailRefs := len(refs)
	checkRiverHistory(t, lines, charges, refs)
	mu.Unlock()

	t.Logf("\n| scenario | jobs | effects | completed | cancelled or discarded | pending | duplicate effects | repeated downstream calls (same key, deduplicated) |\n"+
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"+
		"| River worker killed (SIGKILL) after commits, restarted | %d | %d | %d | %d | %d | %d | %d |",
		fig.jobs, fig.chargeEffects+fig.emailEffects, fig.completed, fig.cancelled, fig.pending, fig.duplicateEffects, fig.repeatedCalls)
	assert.Equal(t, n, fig.chargeEffects+fig.emailEffects, "effects = jobs")
	assert.Equal(t, n/2, fig.emailEffects, "one downstream key per email: a repeated send carries the same key")
	assert.Equal(t, n/2, emailRefs, "every email sent")
	assert.Zero(t, fig.duplicateEffects, "no atomic job's effect twice")
	assert.Zero(t, fig.pending, "jobs still pending")
	assert.Equal(t, n, fig.completed, "every job completed")
	// A send the killed worker made but did not record (the held one, and
	// any other in flight at the kill) is made again, with its key; no
	// other send is.
	assert.Empty(t, repeatedAfterRestart, "sends repeated that the kill did not interrupt")
	assert.Positive(t, fig.repeatedCalls, "the held send is repeated after the restart, with its key")
}
