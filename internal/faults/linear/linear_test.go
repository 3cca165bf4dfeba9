package linear

import (
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// op is one hand-made call of key k with fingerprint fp over [call, ret]
// (ret < 0: never returned).
func op(fp string, call, ret int64, out Output) porcupine.Operation {
	if ret < 0 {
		ret = math.MaxInt64
	}
	return porcupine.Operation{Input: Input{Key: "k", Fingerprint: fp}, Call: call, Return: ret, Output: out}
}

// eraOp is op in era era.
func eraOp(era int, fp string, call, ret int64, out Output) porcupine.Operation {
	o := op(fp, call, ret, out)
	o.Input = Input{Key: "k", Era: era, Fingerprint: fp}
	return o
}

// effects is the final read of key k at t.
func effects(t int64, es ...string) porcupine.Operation {
	return porcupine.Operation{Input: Input{Key: "k", Observe: true}, Call: t, Return: t, Output: Output{Effects: es}}
}

// lost is n calls of fingerprint A that never returned, invoked at 0..n-1.
func lost(n int) []porcupine.Operation {
	var ops []porcupine.Operation
	for i := range n {
		ops = append(ops, op("A", int64(i), -1, unknown()))
	}
	return ops
}

func fresh(v string) Output     { return Output{Answer: Value, Value: v} }
func replay(v string) Output    { return Output{Answer: Value, Value: v, Replayed: true} }
func ranReplay(v string) Output { return Output{Answer: Value, Value: v, Replayed: true, Ran: true} }
func unknown() Output           { return Output{Answer: Unknown} }
func inProgress() Output        { return Output{Answer: InProgress} }
func mismatch() Output          { return Output{Answer: Mismatch} }
func storedErr(fresh bool) Output {
	return Output{Answer: StoredError, Value: "outcome not recorded", Replayed: !fresh}
}

func TestModel(t *testing.T) {
	for _, c := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"twins: one commits, the other replays", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 5, 15, replay("v")), effects(20, "v")}, true},
		{"a replay overlapping the call it replays", []porcupine.Operation{
			op("A", 0, 20, fresh("v")), op("A", 10, 15, replay("v")), effects(30, "v")}, true},
		{"a replay acknowledged before the call it replays began", []porcupine.Operation{
			op("A", 20, 30, fresh("v")), op("A", 0, 10, replay("v")), effects(40, "v")}, false},
		{"a replay of a key nothing committed", []porcupine.Operation{
			op("A", 0, 10, replay("v")), effects(20, "v")}, false},
		{"a call whose body ran reads its own commit back", []porcupine.Operation{
			op("A", 0, 10, ranReplay("v")), op("A", 20, 30, replay("v")), effects(40, "v")}, true},
		{"a call whose body ran replays a twin's commit", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 5, 15, ranReplay("v")), effects(40, "v")}, true},
		{"a call whose body ran replays another value", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, ranReplay("w")), effects(40, "v")}, false},
		{"a lost answer, then its replay", []porcupine.Operation{
			op("A", 0, -1, unknown()), op("A", 20, 30, replay("v")), effects(40, "v")}, true},
		{"the body ran again after an acknowledged answer (one effect, two answers)", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, fresh("w")), effects(40, "w")}, false},
		{"the body ran again with the same answer", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, fresh("v")), effects(40, "v")}, false},
		{"a replay of another value", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, replay("w")), effects(40, "v")}, false},
		{"an unknown outcome, then the work done by a retry", []porcupine.Operation{
			op("A", 0, -1, unknown()), op("A", 20, 30, fresh("v")), effects(40, "v")}, true},
		{"a mismatch while another request holds the key", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("B", 20, 30, mismatch()), effects(40, "v")}, true},
		{"a mismatch while the holder's call runs", []porcupine.Operation{
			op("A", 0, 40, fresh("v")), op("B", 10, 20, mismatch()), effects(50, "v")}, true},
		{"a mismatch for a key never committed", []porcupine.Operation{
			op("B", 0, 10, mismatch()), effects(20)}, false},
		{"a mismatch for the request that holds the key", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, mismatch()), effects(40, "v")}, false},
		{"another request answered from the key's row", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("B", 20, 30, replay("v")), effects(40, "v")}, false},
		{"in progress while the holder's call runs", []porcupine.Operation{
			op("A", 0, 40, fresh("v")), op("A", 10, 20, inProgress()), effects(50, "v")}, true},
		{"in progress after the answer was acknowledged", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), op("A", 20, 30, inProgress()), effects(40, "v")}, false},
		{"in progress while a lost call may still commit", []porcupine.Operation{
			op("A", 0, -1, unknown()), op("A", 20, 30, inProgress()), op("A", 40, 50, replay("v")), effects(60, "v")}, true},
		{"an acknowledged effect gone at the end", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), effects(20)}, false},
		{"two effects for one answer", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), effects(20, "v", "w")}, false},
		{"an effect other than the answered one", []porcupine.Operation{
			op("A", 0, 10, fresh("v")), effects(20, "w")}, false},
		{"a call lost before it committed: no effect", []porcupine.Operation{
			op("A", 0, -1, unknown()), effects(20)}, true},
		{"a call lost after it committed: its effect", []porcupine.Operation{
			op("A", 0, -1, unknown()), effects(20, "x")}, true},
		{"an effect nobody asked for", []porcupine.Operation{
			op("A", 0, 10, inProgress()), effects(20, "x")}, false},
		{"an outcome stored as unknown, replayed, with at most one effect", []porcupine.Operation{
			op("A", 0, 10, storedErr(true)), op("A", 20, 30, storedErr(false)), effects(40, "x")}, true},
		{"an outcome stored as unknown, then a success", []porcupine.Operation{
			op("A", 0, 10, storedErr(true)), op("A", 20, 30, replay("v")), effects(40, "v")}, false},
		{"an outcome stored as unknown with two effects", []porcupine.Operation{
			op("A", 0, 10, storedErr(true)), effects(40, "x", "y")}, false},
		{"many lost calls, then two fresh answers", append(lost(40),
			op("A", 100, 110, fresh("v")), op("A", 120, 130, fresh("w")), effects(140, "w")), false},
		{"many lost calls, then a replay", append(lost(40),
			op("A", 100, 110, replay("v")), effects(140, "v")), true},
		{"lost calls of two requests: the second one's took the key", []porcupine.Operation{
			op("A", 0, -1, unknown()), op("B", 5, -1, unknown()), op("B", 20, 30, replay("v")), op("A", 40, 50, mismatch()), effects(60, "v")}, true},
		{"after the retention the key is new", []porcupine.Operation{
			eraOp(0, "A", 0, 10, fresh("v")), eraOp(1, "B", 20, 30, fresh("w"))}, true},
		{"inside the retention the key is held", []porcupine.Operation{
			eraOp(0, "A", 0, 10, fresh("v")), eraOp(0, "B", 20, 30, fresh("w"))}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.ok, porcupine.CheckOperations(Model(), c.history))
		})
	}
}

// TestStormOfTwins checks a history of 256 twins of one key, all
// overlapping: the model's partition narrows it so that the search ends
// (without it, porcupine gives up on such a history after minutes).
func TestStormOfTwins(t *testing.T) {
	var h []porcupine.Operation
	for i := range int64(256) {
		switch {
		case i == 0:
			h = append(h, op("A", 0, 1000, fresh("v")))
		case i%4 == 1:
			h = append(h, op("A", i, 500+i, inProgress()))
		case i%4 == 2:
			h = append(h, op("A", i, -1, unknown()))
		case i%8 == 3:
			h = append(h, op("A", i, 1000+i, ranReplay("v")))
		default:
			h = append(h, op("A", i, 1000+i, replay("v")))
		}
	}
	ok := append(h, effects(5000, "v"))
	res, err := Check("storm", ok, t.TempDir(), 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Ok, res.Verdict)

	// One in-progress answer invoked after the commit was acknowledged
	// spoils it.
	bad := append(h, op("A", 1001, 1002, inProgress()), effects(5000, "v"))
	res, err = Check("storm-bad", bad, t.TempDir(), 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Illegal, res.Verdict)
}

func TestModelPartitionsByKey(t *testing.T) {
	// One key's fresh answer after another key's says nothing: each key
	// is its own register.
	a := op("A", 0, 10, fresh("v"))
	b := op("A", 20, 30, fresh("w"))
	b.Input = Input{Key: "other", Fingerprint: "A"}
	assert.True(t, porcupine.CheckOperations(Model(), []porcupine.Operation{a, b}))
	b.Input = Input{Key: "k", Fingerprint: "A"}
	assert.False(t, porcupine.CheckOperations(Model(), []porcupine.Operation{a, b}))
}

func TestCheckWritesPicture(t *testing.T) {
	dir := t.TempDir()
	good := []porcupine.Operation{op("A", 0, 10, fresh("v")), op("A", 5, 15, replay("v")), effects(20, "v")}
	res, err := Check("good", good, dir, time.Minute)
	require.NoError(t, err)
	require.NoError(t, res.Err())
	assert.Equal(t, 3, res.Operations)
	assert.Equal(t, 1, res.Keys)
	assert.Empty(t, res.Picture)

	bad := []porcupine.Operation{op("A", 0, 10, fresh("v")), op("A", 20, 30, fresh("w")), effects(40, "w")}
	res, err = Check("bad/history", bad, dir, time.Minute)
	require.NoError(t, err)
	require.Error(t, res.Err())
	assert.Equal(t, []string{"k"}, res.Failing)
	assert.Contains(t, res.Err().Error(), res.Picture)
	assert.True(t, strings.HasPrefix(res.Picture, dir), res.Picture)
	html, err := os.ReadFile(res.Picture)
	require.NoError(t, err)
	assert.Contains(t, string(html), "<html")
	assert.Contains(t, string(html), "fresh value w")
}

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 50 {
				in := Input{Key: "k", Fingerprint: "A"}
				c := r.Begin(in)
				switch {
				case i == 0 && j == 0:
					c.End(fresh("v")) // the only fresh answer: the others replay or fail
				case j%7 == 3:
					c.End(unknown())
				default:
					c.End(replay("v"))
				}
			}
		})
		if i == 0 {
			wg.Wait() // the commit is acknowledged before the twins start
		}
	}
	wg.Wait()
	r.Observe(map[string][]string{"k": {"v"}})
	h := r.History()
	require.Len(t, h, 16*50+1)
	assert.Equal(t, 16*50, r.Calls())
	lost := 0
	for _, o := range h {
		assert.LessOrEqual(t, o.Call, o.Return)
		if o.Return == math.MaxInt64 {
			lost++
		}
	}
	assert.Equal(t, 16*7, lost) // j = 3, 10, 17, 24, 31, 38, 45 of each goroutine
	res, err := Check("recorder", h, "", time.Minute)
	require.NoError(t, err)
	require.NoError(t, res.Err())

	// The same history with the final read missing the effect is not.
	r.Observe(map[string][]string{"k": nil})
	res, err = Check("recorder-lost", r.History(), t.TempDir(), time.Minute)
	require.NoError(t, err)
	assert.Error(t, res.Err())
}

func TestForgeReplay(t *testing.T) {
	r := NewRecorder()
	_, err := r.ForgeReplay()
	require.Error(t, err, "nothing to forge from")
	r.Begin(Input{Key: "k", Fingerprint: "A"}).End(fresh("v"))
	r.Begin(Input{Key: "l", Fingerprint: "B"}).End(fresh("w"))
	f, err := r.ForgeReplay()
	require.NoError(t, err)
	assert.Equal(t, 2, r.Calls(), "the copy's call leaves the recorder alone")
	assert.Equal(t, 3, f.Calls())
	effects := map[string][]string{"k": {"v"}, "l": {"w"}}
	r.Observe(effects)
	f.Observe(effects)
	res, err := Check("real", r.History(), t.TempDir(), 0)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Ok, res.Verdict)
	res, err = Check("forged", f.History(), t.TempDir(), 0)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Illegal, res.Verdict, "a replay of another key's value")
	assert.Equal(t, []string{"k"}, res.Failing)
	assert.FileExists(t, res.Picture)
}
