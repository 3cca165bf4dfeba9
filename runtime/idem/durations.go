package idem

import (
	"slices"
	"sync"
	"time"
)

// recentRuns is how many of a method's latest body durations a Store keeps
// to estimate how long an attempt in progress still needs.
const recentRuns = 16

// recentDurations keeps the latest body durations of each method, measured
// in this process, so that an in-progress answer can advertise when the
// attempt holding the key is likely done instead of the whole lock. It is
// safe for concurrent use; the zero value is ready.
type recentDurations struct {
	mu sync.Mutex
	by map[string]*durationRing
}

// durationRing is the last recentRuns durations of one method.
type durationRing struct {
	d    [recentRuns]time.Duration
	n    int // how many are filled
	next int // where the next one goes
}

// observe records that a body of method ran for d.
func (r *recentDurations) observe(method string, d time.Duration) {
	if r == nil || d < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]*durationRing{}
	}
	ring := r.by[method]
	if ring == nil {
		ring = &durationRing{}
		r.by[method] = ring
	}
	ring.d[ring.next] = d
	ring.next = (ring.next + 1) % recentRuns
	ring.n = min(ring.n+1, recentRuns)
}

// typical returns the 90th percentile (nearest rank) of method's recent
// durations, and false when none is known.
func (r *recentDurations) typical(method string) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	ring := r.by[method]
	var ds []time.Duration
	if ring != nil {
		ds = slices.Clone(ring.d[:ring.n])
	}
	r.mu.Unlock()
	if len(ds) == 0 {
		return 0, false
	}
	slices.Sort(ds)
	rank := (len(ds)*9 + 9) / 10 // ceil(0.9 * n), 1-based
	return ds[rank-1], true
}

// retryAfter is the wait an in-progress answer advertises for method when
// the holder's lock has lockLeft to run: the method's typical duration
// (the 90th percentile of its last recentRuns bodies in this process),
// capped by lockLeft, since the key is free for a takeover then at the
// latest; lockLeft alone when no duration is known yet. At least a second.
// The holder started some time ago, so the estimate errs long, never
// past the lock.
func (r *recentDurations) retryAfter(method string, lockLeft time.Duration) time.Duration {
	d := lockLeft
	if t, ok := r.typical(method); ok {
		d = min(t, lockLeft)
	}
	return max(d, time.Second)
}
