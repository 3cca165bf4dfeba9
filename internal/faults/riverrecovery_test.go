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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemriver"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The recovery worker: the test binary run again as a River client with
// one external job kind and the settings the benchmark passes, so that it
// can be killed with SIGKILL while the job's body is at the provider.
const riverRecoveryEnv = "FAULTS_RIVER_RECOVERY" // "RescueStuckJobsAfter,JobTimeout,LockTimeout"

// recoveryEmail is the job: its body sends one email at the provider.
type recoveryEmail struct {
	Ref string `json:"ref"`
}

func (recoveryEmail) Kind() string { return "recovery_email" }

var recoveryMethod = &idem.Method[string]{Name: "Faults.RecoveryEmail"}

// recoverySettings are the settings that set a River job's recovery time
// after its worker is killed.
type recoverySettings struct {
	rescueAfter, jobTimeout, lockTimeout time.Duration
}

func (s recoverySettings) String() string {
	return fmt.Sprintf("%s,%s,%s", s.rescueAfter, s.jobTimeout, s.lockTimeout)
}

func parseRecoverySettings(v string) (recoverySettings, error) {
	var d [3]time.Duration
	parts := strings.Split(v, ",")
	if len(parts) != len(d) {
		return recoverySettings{}, fmt.Errorf("%s=%q: want three durations", riverRecoveryEnv, v)
	}
	for i, p := range parts {
		var err error
		if d[i], err = time.ParseDuration(p); err != nil {
			return recoverySettings{}, fmt.Errorf("%s=%q: %w", riverRecoveryEnv, v, err)
		}
	}
	return recoverySettings{d[0], d[1], d[2]}, nil
}

// riverRecoveryWorkerMain works recovery jobs until it is killed: River's
// defaults but for the settings given, the store's heartbeat a quarter of
// the lock timeout, the wrapper keyed by the job's Ref (-key) through
// idemriver's default Config.
func riverRecoveryWorkerMain() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "river recovery worker:", err); return 2 }
	set, err := parseRecoverySettings(os.Getenv(riverRecoveryEnv))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(workerDB))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	store, err := idem.NewStore(pool, idem.WithLockTimeout(set.lockTimeout), idem.WithHeartbeat(set.lockTimeout/4))
	if err != nil {
		return fail(err)
	}
	provider := os.Getenv(riverProviderEnv)
	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.External(idemriver.Config[recoveryEmail]{}, func(ctx context.Context, job *river.Job[recoveryEmail]) error {
		ctx = idem.ContextWithDefaultKey(ctx, job.Args.Ref) // the wrapper's -key=email.Ref
		_, err := idem.External(ctx, store, recoveryMethod, riverFP(recoveryMethod.Name, job.Args.Ref), func(ctx context.Context) (string, error) {
			return sendEmail(ctx, provider, idem.DownstreamKey(ctx, "send"), job.Args.Ref)
		})
		return err
	}))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers:              workers,
		JobTimeout:           set.jobTimeout,
		RescueStuckJobsAfter: set.rescueAfter,
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		return fail(err)
	}
	select {} // until killed
}

// BenchmarkRiverRecovery measures how long an external job waits after its
// worker process is killed with SIGKILL mid-body (the only River client, so
// also the leader) and started again at once: until River's rescuer marks
// it retryable, until its body runs again (after the rescue, the retry's
// backoff, the scheduler, and the claim's lock timeout), and until it
// completes. One kill per setting, b.N ignored; the seconds are reported as
// metrics and as a markdown table (docs/messaging.md):
//
//	go test -C internal/faults -run '^$' -bench RiverRecovery -benchtime 1x -v
func BenchmarkRiverRecovery(b *testing.B) {
	for _, set := range []recoverySettings{
		{rescueAfter: 10 * time.Second, jobTimeout: 5 * time.Second, lockTimeout: 40 * time.Second},
		{rescueAfter: 40 * time.Second, jobTimeout: 30 * time.Second, lockTimeout: 5 * time.Second},
	} {
		b.Run(fmt.Sprintf("RescueStuckJobsAfter=%s/LockTimeout=%s", set.rescueAfter, set.lockTimeout), func(b *testing.B) {
			r := measureRiverRecovery(b, set)
			b.ReportMetric(r.rescued.Seconds(), "s-to-rescue")
			b.ReportMetric(r.rerun.Seconds(), "s-to-rerun")
			b.ReportMetric(r.completed.Seconds(), "s-to-complete")
			b.Logf("\n| RescueStuckJobsAfter | JobTimeout | LockTimeout (heartbeat ¼) | body running at the kill | kill → rescued | kill → body runs again | kill → completed | snoozes |\n"+
				"| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n| %s | %s | %s | %.1fs | %.1fs | %.1fs | %.1fs | %d |",
				set.rescueAfter, set.jobTimeout, set.lockTimeout, r.running.Seconds(), r.rescued.Seconds(), r.rerun.Seconds(), r.completed.Seconds(), r.snoozes)
		})
	}
}

// recovery is one measurement, every duration from the kill.
type recovery struct {
	running                   time.Duration // how long the body had run at the kill
	rescued, rerun, completed time.Duration
	snoozes                   int
}

func measureRiverRecovery(b *testing.B, set recoverySettings) recovery {
	b.Helper()
	db := idemtest.New(b)
	ctx := b.Context()
	driver := riverpgxv5.New(db.Pool)
	m, err := rivermigrate.New(driver, nil)
	require.NoError(b, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(b, err)

	var (
		mu      sync.Mutex
		calls   []time.Time
		atFirst = make(chan struct{})
		again   = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, time.Now())
		n := len(calls)
		mu.Unlock()
		switch n {
		case 1: // the body is at the provider when its worker dies
			close(atFirst)
			<-r.Context().Done()
			return
		case 2:
			close(again)
		}
		_, _ = io.WriteString(w, "msg-"+r.URL.Query().Get("key"))
	}))
	defer srv.Close()
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), riverRecoveryEnv+"="+set.String(), workerDB+"="+db.URL, riverProviderEnv+"="+srv.URL)
		cmd.Stderr = os.Stderr
		require.NoError(b, cmd.Start())
		return cmd
	}

	inserter, err := river.NewClient(driver, &river.Config{})
	require.NoError(b, err)
	res, err := inserter.Insert(ctx, recoveryEmail{Ref: "recovery-1"}, nil)
	require.NoError(b, err)
	first := start()
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	select {
	case <-atFirst:
	case err := <-exited:
		b.Fatalf("the worker exited before the kill: %v", err)
	case <-time.After(2 * time.Minute):
		_ = first.Process.Kill()
		b.Fatal("the job did not reach the provider within two minutes")
	}
	var r recovery
	var attempted time.Time
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT attempted_at FROM river_job WHERE id = $1`, res.Job.ID).Scan(&attempted))
	require.NoError(b, first.Process.Kill()) // SIGKILL
	killed := time.Now()
	<-exited
	r.running = killed.Sub(attempted)
	second := start()
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()

	deadline := time.Now().Add(5 * time.Minute)
	for {
		var state string
		var rescued *time.Time
		require.NoError(b, db.Pool.QueryRow(ctx, `SELECT state::text, coalesce((metadata->>'snoozes')::int, 0),
			(SELECT (e->>'at')::timestamptz FROM unnest(errors) e WHERE e->>'error' LIKE 'Stuck job rescued%' LIMIT 1)
			FROM river_job WHERE id = $1`, res.Job.ID).Scan(&state, &r.snoozes, &rescued))
		if rescued != nil && r.rescued == 0 {
			r.rescued = rescued.Sub(killed)
		}
		if state == "completed" {
			var finalized time.Time
			require.NoError(b, db.Pool.QueryRow(ctx, `SELECT finalized_at FROM river_job WHERE id = $1`, res.Job.ID).Scan(&finalized))
			r.completed = finalized.Sub(killed)
			break
		}
		require.NotContains(b, []string{"cancelled", "discarded"}, state)
		require.True(b, time.Now().Before(deadline), "the job is still %s five minutes after the kill", state)
		time.Sleep(50 * time.Millisecond)
	}
	<-again
	mu.Lock()
	require.Len(b, calls, 2, "one send, and one again after the takeover")
	r.rerun = calls[1].Sub(killed)
	mu.Unlock()
	return r
}
