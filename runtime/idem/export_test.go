package idem

import (
	"slices"
	"time"
)

// RecordForNewKey is the record statement Atomic sends on s for a key its
// lookup found no row for, with its arguments (Store.record): the fresh
// form, a plain INSERT; or, with upsert, the takeover form (INSERT … ON
// CONFLICT DO UPDATE) with the same row, which the runtime sends for an
// expired key only. BenchmarkRecordForms weighs the two.
func RecordForNewKey(s *Store, method, key string, fingerprint, resp []byte, upsert bool) (string, []any) {
	c := call{method: method, key: key, fp: fingerprint}
	_, stmt, args := s.record(false, false, c, time.Hour, 0, resp, nil, nil)
	if !upsert {
		return stmt, args
	}
	// The takeover form also takes the fence the lookup saw (0: no row),
	// before the outcome's three arguments and the claim wait.
	return s.q.Record.Takeover, slices.Insert(args, len(args)-4, any(int64(0)))
}

// WithoutKeyLock makes a store of the runtime before the key's lock
// (keylock.go), which twins did not queue on: the rolling-upgrade test runs
// it beside today's.
func WithoutKeyLock() Option { return func(c *config) { c.noKeyLock = true } }

// ReplayRate is method's recent replay rate in s (hint.go), from 0 to 1.
func ReplayRate(s *Store, method string) float64 {
	v, ok := s.replays.by.Load(method)
	if !ok {
		return 0
	}
	return float64(v.(interface{ Load() int32 }).Load()) / replayRateOne
}

// ForgetReplays forgets every method's replay rate in s: its next calls
// are taken for first attempts unless marked.
func ForgetReplays(s *Store) {
	s.replays.by.Clear()
	s.replays.n.Store(0)
}

// LookupFirstRate is the replay rate at which calls look up first.
const LookupFirstRate = float64(lookupFirstRate) / replayRateOne
