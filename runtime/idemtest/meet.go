package idemtest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Meeting makes the concurrent attempts of a twin or storm test really meet
// on their key, however loaded the machine: the first attempt to claim the
// key is held inside its claim (Claimed, called from the store's Claimed
// hook) until every other attempt has met the claim, then released. An
// attempt has met the claim when it claimed the key too (atomic mode: its
// lookup found the key free as well), was told the key is in progress or
// answered by a replay (Waited, called from the store's InProgress and
// Replayed hooks), or is blocked in PostgreSQL on a row lock of the key
// (read from pg_stat_activity of the test's database).
//
// The hold also ends when every attempt has claimed the key (a broken
// runtime lets them all in: the test then fails on what they did, never
// hangs) or after MeetingBound. Met reports how many attempts met the claim,
// for the test's log. Meeting is for tests only; the runtime knows nothing of
// it beyond its hooks.
type Meeting struct {
	db     *DB
	others int // attempts besides the first

	claims  atomic.Int64
	mu      sync.Mutex
	waited  map[int]bool // callers told "in progress"
	blocked int          // most attempts seen blocked on the row lock at once
	met     int          // others that met the claim when the hold ended
}

// MeetingBound is the longest a Meeting holds the first claim. It only
// prevents a hang when attempts cannot meet; it is never a timing assertion.
const MeetingBound = 20 * time.Second

// NewMeeting returns a Meeting for n concurrent attempts on db.
func NewMeeting(db *DB, n int) *Meeting {
	return &Meeting{db: db, others: n - 1, waited: map[int]bool{}}
}

type callerKey struct{}

// Caller marks ctx as attempt i's, so that Waited counts each attempt once.
func Caller(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, callerKey{}, i)
}

// Waited records that the attempt whose context is ctx met the first claim:
// it was told the key is in progress, or was answered by a replay. Call it
// from the store's InProgress and Replayed hooks.
func (m *Meeting) Waited(ctx context.Context) {
	i, ok := ctx.Value(callerKey{}).(int)
	if !ok {
		return
	}
	m.mu.Lock()
	m.waited[i] = true
	m.mu.Unlock()
}

// Claimed holds the first claim of the key until the others have met it (see
// Meeting). Call it from the store's Claimed hook; a later claim passes
// through, and has met the first (in atomic mode twins all run the body;
// the first to record the key commits).
func (m *Meeting) Claimed(ctx context.Context) {
	if m.claims.Add(1) != 1 {
		m.Waited(ctx)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, MeetingBound)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		met := m.count(ctx)
		if met >= m.others || int(m.claims.Load()) > m.others {
			m.setMet(met)
			return
		}
		select {
		case <-ctx.Done():
			m.setMet(met)
			return
		case <-tick.C:
		}
	}
}

// count returns how many attempts have met the claim so far.
func (m *Meeting) count(ctx context.Context) int {
	var blocked int
	// Backends of this database waiting on a lock: twins blocked on the
	// claim's row. An error (the context ended) counts none.
	_ = m.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&blocked)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blocked = max(m.blocked, blocked)
	return len(m.waited) + m.blocked
}

func (m *Meeting) setMet(n int) {
	m.mu.Lock()
	m.met = min(n, m.others)
	m.mu.Unlock()
}

// Met returns how many attempts besides the first met its claim on the key
// before it was released, and how many there were.
func (m *Meeting) Met() (met, others int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.met, m.others
}
