package faults

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seed = flag.Uint64("faults.seed", 1, "seed of TestSeededFaultSchedule's schedule of faults")

// fault is one step of a seeded schedule: a kind of fault, started once the
// load has made after claims.
type fault struct {
	kind  string
	after int64
}

// faultKinds are the faults a schedule draws from.
var faultKinds = []string{"reset", "blackhole", "latency", "restart"}

// schedule draws n faults from seed, spread over a load of claims claims:
// the same seed gives the same faults, in the same order, at the same
// points of the load (the interleaving of the calls themselves is the
// machine's).
func schedule(seed uint64, n int, claims int64) []fault {
	r := rand.New(rand.NewPCG(seed, 0x1de))
	step := max(claims/int64(n+1), 1)
	var fs []fault
	for i := range n {
		fs = append(fs, fault{kind: faultKinds[r.IntN(len(faultKinds))], after: int64(i+1)*step + r.Int64N(step/2+1)})
	}
	return fs
}

// TestSeededFaultSchedule runs a load of atomic, external and inline
// intentions, four twins each, under a schedule of faults drawn from
// -faults.seed (connections reset, a blackhole partition, added latency,
// the server killed and restarted), each lasting until every call in flight
// has returned, and checks the promise and the history's linearizability.
// The long mode makes at least 10,000 calls (2,700 intentions x 4 twins)
// under 24 faults, at the short mode's concurrency: 30 intentions at once
// (at a tenth of them at once, a loaded 2-core machine starved callers past
// their settle bound).
func TestSeededFaultSchedule(t *testing.T) {
	n := size(10, 900)
	name := fmt.Sprintf("seeded fault schedule (seed %d)", *seed)
	e := newEnv(t, name, envConfig{maxActive: 30})
	ins := withInline(intents("seeded", n, n), "seeded", n)
	faults := schedule(*seed, size(4, 24), int64(len(ins)))
	var plan []string
	for _, f := range faults {
		plan = append(plan, fmt.Sprintf("%s after %d claims", f.kind, f.after))
	}
	t.Logf("%s: %s", name, strings.Join(plan, ", "))
	wait := e.storm(ins, 4)
	applied := 0
	for _, f := range faults {
		e.awaitClaims(f.after)
		select {
		case <-e.allReturned():
		default:
			e.inject(f)
			applied++
			continue
		}
		break
	}
	wait()
	t.Logf("%s: %d of %d faults applied before the load ended", name, applied, len(faults))
	require.Positive(t, applied, "no fault was applied before the load ended")
	e.check(ins)
	if *long {
		assert.GreaterOrEqual(t, e.history.Calls(), 10000, "%s: calls checked in the long mode", name)
	}
}

// inject applies fault f until every call in flight when it started has
// returned (and one call failed, or the load ended).
func (e *env) inject(f fault) {
	t := e.t
	t.Helper()
	switch f.kind {
	case "reset":
		e.addToxic("reset", "reset_peer", "upstream", `{"timeout":0}`)
		e.drainInflight()
		e.removeToxic("reset")
	case "blackhole":
		e.addToxic("blackhole-up", "timeout", "upstream", `{"timeout":0}`)
		e.addToxic("blackhole-down", "timeout", "downstream", `{"timeout":0}`)
		e.drainInflight()
		e.removeToxic("blackhole-up")
		e.removeToxic("blackhole-down")
	case "latency":
		// Slow, not broken: answers come late, some after their callers'
		// deadlines.
		e.addToxic("latency", "latency", "downstream", `{"latency":300,"jitter":300}`)
		e.awaitClaims(e.claimed.Load() + 20)
		e.removeToxic("latency")
	case "restart":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, suite.pg.Kill(ctx))
		e.drainInflight()
		require.NoError(t, suite.pg.Start(ctx))
	default:
		t.Fatalf("unknown fault %q", f.kind)
	}
}

// TestScheduleIsSeeded: a seed gives one schedule, another seed another.
func TestScheduleIsSeeded(t *testing.T) {
	a, b := schedule(7, 24, 2700), schedule(7, 24, 2700)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, schedule(8, 24, 2700))
	for i := 1; i < len(a); i++ {
		assert.Less(t, a[i-1].after, a[i].after, "faults start in order")
	}
}

// awaitClaims waits until n claims have been made or every caller of the
// storm has finished. Unlike waitClaims it sets no time limit of its own: a
// starved machine (the long mode's thousand callers on two cores) may take
// minutes, and the callers' settleBound bounds the storm.
func (e *env) awaitClaims(n int64) {
	for e.claimed.Load() < n {
		select {
		case <-e.allReturned():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
