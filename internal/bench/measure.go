package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// load says how much one measurement does: ops calls in all; or, when
// duration is positive, as many as the goroutines complete in that time; or,
// when until is not nil, as many as they complete before it is closed.
type load struct {
	ops      int
	duration time.Duration
	until    <-chan struct{}
}

// result is one measurement: one path at one concurrency.
type result struct {
	path        string
	concurrency int
	ops         int
	wall        time.Duration
	p50, p99    time.Duration
	// faults is the server's minor page faults per call, where an
	// experiment counts them (serverProcs); negative when not counted.
	faults float64
	// cpu is the machine's busy CPU time per call, client and server
	// together (/proc/stat); 0 when unknown. On a machine whose cores the
	// client and the server share it is what bounds throughput, and it
	// varies far less from run to run than latency does.
	cpu time.Duration
	// serverCPU is the server processes' CPU time per call, where an
	// experiment counts it (serverProcs); 0 when not counted.
	serverCPU time.Duration
}

// throughput is calls per second over the wall time.
func (r result) throughput() float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.ops) / r.wall.Seconds()
}

// counter hands out call numbers; one per path, so keys never repeat across
// the path's measurements.
type counter struct{ n atomic.Int64 }

func (c *counter) next() int { return int(c.n.Add(1)) }

// measure runs fn from concurrency goroutines, which start together, until
// the load is done (measured by time, each goroutine makes at least one
// call), and returns the latency percentiles of the calls and
// their throughput. The first error stops every goroutine and is returned.
func measure(ctx context.Context, fn op, keys *counter, concurrency int, l load) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		remaining atomic.Int64
		deadline  time.Time
		wg        sync.WaitGroup
		errOnce   sync.Once
		firstErr  error
		start     = make(chan struct{})
		lat       = make([][]time.Duration, concurrency)
	)
	remaining.Store(int64(l.ops))
	// more reports whether a goroutine that has made done calls makes
	// another. Measured by time, each makes at least one, so that a
	// goroutine started late on a loaded machine still reports.
	more := func(done int) bool {
		if ctx.Err() != nil {
			return false
		}
		if done == 0 && (l.until != nil || l.duration > 0) {
			return true
		}
		switch {
		case l.until != nil:
			select {
			case <-l.until:
				return false
			default:
				return true
			}
		case l.duration > 0:
			return time.Now().Before(deadline)
		}
		return remaining.Add(-1) >= 0
	}
	for g := range concurrency {
		wg.Go(func() {
			<-start
			for done := 0; more(done); done++ {
				t0 := time.Now()
				err := fn(ctx, keys.next())
				lat[g] = append(lat[g], time.Since(t0))
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	busy0 := busyCPU()
	t0 := time.Now()
	deadline = t0.Add(l.duration)
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	busy1 := busyCPU()
	if firstErr != nil {
		return result{}, firstErr
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return result{}, fmt.Errorf("no call completed at concurrency %d", concurrency)
	}
	slices.Sort(all)
	r := result{concurrency: concurrency, ops: len(all), wall: wall, p50: percentile(all, 0.50), p99: percentile(all, 0.99)}
	if busy0 > 0 && busy1 > busy0 {
		r.cpu = (busy1 - busy0) / time.Duration(len(all))
	}
	return r, nil
}

// busyCPU returns the CPU time all cores have spent busy since boot
// (/proc/stat: every state but idle and iowait), 0 where it cannot be read.
func busyCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	// /proc/stat counts in USER_HZ ticks, 100 a second on Linux.
	return time.Duration(busy) * (time.Second / 100)
}

// percentile returns the q-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// warmUp is the load that warms a path up at concurrency c before it is
// measured: enough calls that every connection the measurement will use is
// open and has run each statement past the server's first five executions,
// which are planned afresh each time (custom plans, a millisecond or more
// for the ledger's statements) before a cached generic plan takes over.
func warmUp(c, ops int) load {
	return load{ops: max(20*c, min(1000, ops/2))}
}
