package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/faults/linear"
)

// The River scenario's history: each worker process prints every job it
// works, once when the job's work begins and once when it ends (recordJobs),
// and the test checks the calls with the effects read at the end. A job
// whose work began in the killed worker and never ended is a call whose
// outcome is unknown.

// riverLine is what a River worker prints: a call begun (Begun, with its key,
// fingerprint and start) or ended.
type riverLine struct {
	Begun bool `json:",omitempty"`
	Call  historyCall
}

// riverEmitter prints lines on stdout, one at a time: a line is written
// before the work it announces begins, so a kill cannot lose it.
func riverEmitter() func(riverLine) {
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	return func(l riverLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
}

// answerKey keys, in a job's context, where the job's call puts its answer
// (answered) for recordJobs.
type answerKey struct{}

func withAnswer(ctx context.Context) (context.Context, *string) {
	v := new(string)
	return context.WithValue(ctx, answerKey{}, v), v
}

// answered notes v as the answer of ctx's job.
func answered(ctx context.Context, v string) {
	if p, ok := ctx.Value(answerKey{}).(*string); ok {
		*p = v
	}
}

// recordJobs wraps w so that each job it works is printed as a call of
// method with the job's ref. The call spans the whole of w's work: an
// atomic job's answer counts once its transaction (which also completes the
// job) has committed.
func recordJobs[T river.JobArgs](emit func(riverLine), method string, ref func(T) string, w river.Worker[T]) river.Worker[T] {
	return &recordedWorker[T]{Worker: w, emit: emit, method: method, ref: ref}
}

type recordedWorker[T river.JobArgs] struct {
	river.Worker[T]
	emit   func(riverLine)
	method string
	ref    func(T) string
}

// Work works the job, printing its call before and after. The store's
// Executed hook marks a call whose body ran: a success without it is a
// replay.
func (w *recordedWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	ref := w.ref(job.Args)
	c := historyCall{Key: riverHistoryKey(w.method, ref), Fingerprint: fmt.Sprintf("%x", riverFP(w.method, ref)), Start: time.Now()}
	w.emit(riverLine{Begun: true, Call: c})
	ctx, ran := withRan(ctx)
	ctx, answer := withAnswer(ctx)
	err := w.Worker.Work(ctx, job)
	c.End, c.Replayed = time.Now(), !ran.Load()
	if err != nil {
		c.Err = errKind(err)
	} else {
		c.Value = *answer
	}
	w.emit(riverLine{Call: c})
	return err
}

// riverHistoryKey is the history's key of method's job ref.
func riverHistoryKey(method, ref string) string { return method + " " + ref }

// renderRiverCharge renders a charge's answer as the effect row it names.
func renderRiverCharge(id int64, ref string) string {
	return fmt.Sprintf("river_effects %d (%s)", id, ref)
}

// readRiverLines collects the lines a worker prints on r until it ends.
func readRiverLines(r io.Reader, mu *sync.Mutex, lines *[]riverLine) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var l riverLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			mu.Lock()
			*lines = append(*lines, l)
			mu.Unlock()
		}
	}
}

// checkRiverHistory checks the workers' calls for linearizability with the
// effects found at the end: the charges' rows and the emails the provider
// received, by downstream key (it answers "msg-" and the key). It proves
// the check can fail on this history, as the lossy-proxy tests do
// (linear.Recorder.ForgeReplay).
func checkRiverHistory(t *testing.T, lines []riverLine, charges map[string][]string, emailKeys map[string]map[string]bool) {
	t.Helper()
	rec := linear.NewRecorder()
	type begun struct {
		key   string
		start int64
	}
	ended := map[begun]bool{}
	for _, l := range lines {
		if !l.Begun {
			ended[begun{l.Call.Key, l.Call.Start.UnixNano()}] = true
		}
	}
	for _, l := range lines {
		c := l.Call
		switch {
		case l.Begun && !ended[begun{c.Key, c.Start.UnixNano()}]: // the kill cut it short
			rec.Add(linear.Input{Key: c.Key, Fingerprint: c.Fingerprint}, c.Start, c.Start, linear.Output{Answer: linear.Unknown})
		case l.Begun:
		case c.Err != "":
			rec.Add(linear.Input{Key: c.Key, Fingerprint: c.Fingerprint}, c.Start, c.End, errOutput(c.Err, c.Replayed, false))
		default:
			rec.Add(linear.Input{Key: c.Key, Fingerprint: c.Fingerprint}, c.Start, c.End, linear.Output{Answer: linear.Value, Value: c.Value, Replayed: c.Replayed})
		}
	}
	effects := map[string][]string{}
	for ref, rows := range charges {
		effects[riverHistoryKey(riverChargeMethod.Name, ref)] = rows
	}
	for ref, keys := range emailKeys {
		k := riverHistoryKey(riverEmailMethod.Name, ref)
		for key := range keys {
			effects[k] = append(effects[k], "msg-"+key)
		}
	}
	forged, err := rec.ForgeReplay()
	require.NoError(t, err)
	rec.Observe(effects)
	name := "River worker killed (SIGKILL), restarted"
	res, err := linear.Check(name, rec.History(), *pictures, checkTimeout)
	require.NoError(t, err)
	assertLongOperations(t, name, res)
	t.Logf("%s: %s (%d calls)", name, res, rec.Calls())
	record(figures{name: name, linear: res})
	assert.NoError(t, res.Err(), "%s", name)

	// The check sees this history's answers: with one call more, answered
	// as a replay of another key's value, it is not linearizable.
	forged.Observe(effects)
	bad, err := linear.Check(name+" with a forged replay", forged.History(), t.TempDir(), checkTimeout)
	require.NoError(t, err)
	require.Error(t, bad.Err(), "a replay of another key's value is not linearizable")
	t.Logf("%s with a forged replay: %s: %v", name, bad, bad.Err())
	assert.Regexp(t, `^not linearizable: 1 of \d+ keys`, bad.Err().Error(), "only the forged call's key")
	assert.FileExists(t, bad.Picture)
}
