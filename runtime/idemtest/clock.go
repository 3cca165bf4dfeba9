package idemtest

import (
	"sync"
	"time"
)

// Clock is a controllable clock for idem.WithClock: tests step past a
// retention window or a lock timeout without sleeping. Safe for concurrent use.
//
//	clock := idemtest.NewClock(time.Time{})
//	store, err := idem.NewStore(db.Pool, idem.WithClock(clock.Now))
//	clock.Advance(49 * time.Hour)
//
// (ExampleClock in the package's tests runs it.)
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// defaultClockStart is where a Clock made from a zero time starts: a fixed
// instant, so tests are deterministic.
func defaultClockStart() time.Time {
	return time.Date(2026, time.March, 14, 9, 26, 53, 589793000, time.UTC)
}

// NewClock returns a clock that reads start until advanced. A zero start
// means a fixed instant, 2026-03-14 09:26:53.589793 UTC, so tests are
// deterministic. The time is truncated to microseconds, the
// precision PostgreSQL stores, so a value read back from the database equals
// the one written.
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = defaultClockStart()
	}
	return &Clock{now: start.Truncate(time.Microsecond)}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative), truncated
// to microseconds.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).Truncate(time.Microsecond)
}
