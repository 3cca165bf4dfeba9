package linear

import (
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// never is the return time of a call whose outcome is unknown: it may take
// effect at any instant after its invocation, or not at all.
const never = math.MaxInt64

// Recorder records a history of calls from any number of goroutines.
type Recorder struct {
	start time.Time

	mu    sync.Mutex
	ops   []porcupine.Operation
	eras  map[string]int // the latest era of each key
	lanes []bool         // lanes (porcupine's client ids) in use, for the picture
}

// NewRecorder returns an empty recorder; its clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), eras: map[string]int{}}
}

// Call is one recorded call between its Begin and its End.
type Call struct {
	r    *Recorder
	in   Input
	at   int64
	lane int
}

// now is the recorder's monotonic clock, in nanoseconds since it started.
func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Begin records the invocation of a call; End records its answer. Take the
// time of Begin just before the call is made.
func (r *Recorder) Begin(in Input) *Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	lane := 0
	for lane < len(r.lanes) && r.lanes[lane] {
		lane++
	}
	if lane == len(r.lanes) {
		r.lanes = append(r.lanes, false)
	}
	r.lanes[lane] = true
	if in.Era > r.eras[in.Key] {
		r.eras[in.Key] = in.Era
	} else if _, ok := r.eras[in.Key]; !ok {
		r.eras[in.Key] = in.Era
	}
	return &Call{r: r, in: in, at: r.now(), lane: lane}
}

// End records the call's answer, as it returned. An Unknown answer is
// recorded as never returning: the call may take effect later, or never.
func (c *Call) End(out Output) {
	r := c.r
	ret := r.now()
	if out.Answer == Unknown {
		ret = never
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lanes[c.lane] = false
	r.ops = append(r.ops, porcupine.Operation{ClientId: c.lane, Input: c.in, Call: c.at, Output: out, Return: ret})
}

// Add records a call whose times were taken elsewhere (another process's
// calls, say): invoked at call and returned at ret (on the recorder's clock,
// see Since), or never returned if out is Unknown.
func (r *Recorder) Add(in Input, call, ret time.Time, out Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := int64(ret.Sub(r.start))
	if out.Answer == Unknown {
		end = never
	}
	if _, ok := r.eras[in.Key]; !ok || in.Era > r.eras[in.Key] {
		r.eras[in.Key] = in.Era
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: len(r.lanes), Input: in, Call: int64(call.Sub(r.start)), Output: out, Return: end})
}

// Observe records the final read of the effects, by key, once every call
// has returned: one read per key recorded or found in effects. Each key's
// effects are sorted.
func (r *Recorder) Observe(effects map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := map[string]bool{}
	for k := range r.eras {
		keys[k] = true
	}
	for k := range effects {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	at := r.now()
	for _, k := range sorted {
		r.ops = append(r.ops, porcupine.Operation{
			ClientId: len(r.lanes),
			Input:    Input{Key: k, Era: r.eras[k], Observe: true},
			Call:     at,
			Output:   Output{Effects: sortedCopy(effects[k])},
			Return:   at,
		})
	}
}

// ForgeReplay returns a copy of the recorder with one call more, after
// every call recorded so far: a call of the first key answered with a value,
// answered as a replay of another key's value, which no linearization
// explains. A scenario checks the copy to prove that its check sees its
// answers (the copy must be reported not linearizable); r is left alone.
func (r *Recorder) ForgeReplay() (*Recorder, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Recorder{start: r.start, ops: slices.Clone(r.ops), eras: maps.Clone(r.eras), lanes: slices.Clone(r.lanes)}
	var first *porcupine.Operation
	for _, op := range r.ops {
		in, out := op.Input.(Input), op.Output.(Output)
		switch {
		case in.Observe || out.Answer != Value:
		case first == nil:
			first = &op
		case in.Key != first.Input.(Input).Key && out.Value != first.Output.(Output).Value:
			at := r.now()
			c.ops = append(c.ops, porcupine.Operation{ClientId: len(c.lanes), Input: first.Input, Call: at,
				Output: Output{Answer: Value, Value: out.Value, Replayed: true}, Return: at})
			return c, nil
		}
	}
	return nil, errors.New("forge a replay: the history has no two keys answered with a value")
}

// History returns a copy of the operations recorded so far.
func (r *Recorder) History() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Calls is the number of calls recorded (final reads not counted).
func (r *Recorder) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, op := range r.ops {
		if !op.Input.(Input).Observe {
			n++
		}
	}
	return n
}
