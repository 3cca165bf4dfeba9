package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idem"
)

// The worker: the test binary run again as a separate process (the caller),
// so that it can be killed with SIGKILL in the middle of its calls.
const (
	workerEnv  = "FAULTS_WORKER"      // set: run as a worker, not as tests
	workerDB   = "FAULTS_WORKER_DB"   // connection string of the scenario's database
	workerBank = "FAULTS_WORKER_BANK" // URL of the bank, served by the test
	workerN    = "FAULTS_WORKER_N"    // intentions per kind
)

// workerLine is what a worker prints for each call: its answer (a receipt
// or a payout, or the kind of its error, errKind) and when it ran, for the
// history.
type workerLine struct {
	Key      string
	Memo     string
	Receipt  *receipt `json:",omitempty"`
	Payout   *payout  `json:",omitempty"`
	Err      string   `json:",omitempty"`
	Replayed bool     `json:",omitempty"`
	Ran      bool     `json:",omitempty"` // the body ran during the call
	Start    time.Time
	End      time.Time
}

// workerMain makes every intention, two twins each, retrying until done, and
// prints one line per success.
func workerMain() int {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(workerN))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	pool, err := pgxpool.New(ctx, os.Getenv(workerDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer pool.Close()
	store, err := idem.NewStore(pool, idem.WithLockTimeout(lockTimeout), idem.WithRetention(time.Hour), idem.WithHeartbeat(lockTimeout/4),
		idem.WithHooks(idem.Hooks{Executed: func(ctx context.Context, _ idem.Event) { markRan(ctx) }}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	svc := newService(store, httpBank{url: os.Getenv(workerBank)})
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	var wg sync.WaitGroup
	for _, in := range intents("killed", n, n) {
		for range 2 {
			wg.Go(func() {
				backoff := 5 * time.Millisecond
				for giveUp := time.Now().Add(settleBound); time.Now().Before(giveUp); {
					cctx, cancel := context.WithTimeout(ctx, callDeadline)
					cctx = idem.ContextWithWait(idem.ContextWithScope(idem.ContextWithKey(cctx, in.key), scope))
					cctx, o := idem.ContextWithOutcome(cctx)
					cctx, ran := withRan(cctx)
					line := workerLine{Key: in.key, Memo: in.req.Memo, Start: time.Now()}
					var err error
					if in.kind == atomicCall {
						var r receipt
						r, err = svc.Charge(cctx, in.req)
						line.Receipt = &r
					} else {
						var p payout
						p, err = svc.Payout(cctx, in.req)
						line.Payout = &p
					}
					cancel()
					line.End, line.Replayed, line.Ran = time.Now(), o.Replayed(), ran.Load()
					if err != nil {
						line.Receipt, line.Payout, line.Err = nil, nil, errKind(err)
					}
					mu.Lock()
					_ = out.Encode(line)
					mu.Unlock()
					if err == nil {
						return
					}
					backoff = min(2*backoff, 500*time.Millisecond)
					time.Sleep(time.Duration(rand.Int64N(int64(backoff))) + time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	return 0
}

// httpBank is the bank as a worker reaches it: over HTTP, served by the test.
type httpBank struct{ url string }

// Transfer posts the transfer and decodes the bank's answer.
func (h httpBank) Transfer(ctx context.Context, key, memo string, amount int64) (transfer, error) {
	body, err := json.Marshal(transfer{Key: key, Memo: memo, Amount: amount})
	if err != nil {
		return transfer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return transfer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return transfer{}, fmt.Errorf("bank: %w", err)
	}
	defer resp.Body.Close()
	var t transfer
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return transfer{}, fmt.Errorf("bank: %w", err)
	}
	return t, nil
}

// TestCallerKilled kills the calling process with SIGKILL while it is in the
// middle of its calls, with a transfer made at the bank whose answer it never
// got, then runs it again with the same keys.
func TestCallerKilled(t *testing.T) {
	n := size(20, 1250)
	e := newEnv(t, "caller killed (SIGKILL) and rerun", envConfig{})
	ins := intents("killed", n, n)
	byKey := map[string]intent{}
	for _, in := range ins {
		byKey[in.key] = in
	}

	var calls int
	var mu sync.Mutex
	atBank := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req transfer
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tr, err := e.bank.Transfer(r.Context(), req.Key, req.Memo, req.Amount)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mu.Lock()
		calls++
		hold := calls == n/2
		mu.Unlock()
		if hold { // the money moved; the caller dies before it hears so
			close(atBank)
			<-r.Context().Done()
			return
		}
		_ = json.NewEncoder(w).Encode(tr)
	}))
	defer srv.Close()

	run := func(kill bool) []workerLine {
		began := time.Now()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"=1", workerDB+"="+suite.pg.URL(e.db.Name), workerBank+"="+srv.URL, workerN+"="+strconv.Itoa(n))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		var lines []workerLine
		read := make(chan struct{})
		go func() {
			defer close(read)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l workerLine
				if json.Unmarshal(sc.Bytes(), &l) == nil {
					lines = append(lines, l)
				}
			}
		}()
		if kill {
			<-atBank
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
		}
		<-read
		err = cmd.Wait()
		if !kill {
			require.NoError(t, err, "the rerun worker failed")
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, l := range lines {
			e.history.Add(e.linInput(byKey[l.Key]), l.Start, l.End, workerOutput(l))
		}
		if kill {
			// Every intention may have had a call in flight when the worker
			// died: one that never returned.
			for _, in := range ins {
				e.history.Add(e.linInput(in), began, time.Now(), linear.Output{Answer: linear.Unknown})
			}
		}
		return successes(lines)
	}
	first := run(true)
	second := run(false)
	srv.Close()
	t.Logf("the killed worker reported %d successes, the rerun %d", len(first), len(second))

	e.mu.Lock()
	for _, l := range append(first, second...) {
		e.fig.calls++
		e.fig.ok++
		if l.Receipt != nil {
			id := intent{key: l.Key, req: request{Memo: l.Receipt.Memo}}.id()
			e.responses[id] = append(e.responses[id], *l.Receipt)
		} else if l.Payout != nil {
			id := intent{key: l.Key, req: request{Memo: l.Payout.Memo}}.id()
			e.responses[id] = append(e.responses[id], *l.Payout)
		}
	}
	e.mu.Unlock()
	e.check(ins)
}

// workerOutput is the history's output of a worker's call.
func workerOutput(l workerLine) linear.Output {
	switch {
	case l.Err != "":
		return errOutput(l.Err, l.Replayed, l.Ran)
	case l.Receipt != nil:
		return linear.Output{Answer: linear.Value, Value: render(*l.Receipt), Replayed: l.Replayed, Ran: l.Ran}
	default:
		return linear.Output{Answer: linear.Value, Value: render(*l.Payout), Replayed: l.Replayed, Ran: l.Ran}
	}
}

// successes are the lines of calls that succeeded.
func successes(lines []workerLine) []workerLine {
	var ok []workerLine
	for _, l := range lines {
		if l.Err == "" {
			ok = append(ok, l)
		}
	}
	return ok
}
