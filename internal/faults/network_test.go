package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// size picks a count for the short mode (CI) or the long one (-faults.long).
func size(short, big int) int {
	if *long {
		return big
	}
	return short
}

// waitClaims waits until n claims have been made or every caller is done.
func (e *env) waitClaims(n int64) {
	e.t.Helper()
	e.waitFor("claims", func() bool {
		e.mu.Lock()
		done := e.stormDone
		e.mu.Unlock()
		return done || e.claimed.Load() >= n
	})
}

// TestPostgresRestart stops PostgreSQL with an immediate shutdown (what
// pg_ctl stop -m immediate sends) in the middle of a load of atomic, external
// and inline calls with repeated keys, waits until every call in flight has
// returned, and starts it again; on the pgx and the database/sql path.
func TestPostgresRestart(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) {
		n := size(30, 700)
		e := newEnv(t, "PostgreSQL stopped (immediate) and restarted"+p.label(), envConfig{path: p})
		ins := withInline(intents("restart", n, n), "restart", n)
		begin := time.Now()
		wait := e.storm(ins, 4)
		e.waitClaims(int64(len(ins) / 3))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, suite.pg.Kill(ctx))
		e.drainInflight()
		require.NoError(t, suite.pg.Start(ctx))
		wait()
		t.Logf("done at %s", time.Since(begin))
		e.check(ins)
	})
}

// TestConnectionReset resets every connection (toxiproxy reset_peer) three
// times during a load, each time until every call in flight has returned.
func TestConnectionReset(t *testing.T) {
	n := size(20, 700)
	e := newEnv(t, "connection reset (reset_peer)", envConfig{})
	ins := withInline(intents("reset", n, n), "reset", n)
	begin := time.Now()
	wait := e.storm(ins, 4)
	for round := int64(1); round <= 3; round++ {
		e.waitClaims(round * int64(len(ins)) / 4)
		e.addToxic("reset", "reset_peer", "upstream", `{"timeout":0}`)
		t.Logf("round %d: reset on at %s", round, time.Since(begin))
		e.drainInflight()
		e.removeToxic("reset")
		t.Logf("round %d: reset off at %s", round, time.Since(begin))
	}
	wait()
	t.Logf("done at %s", time.Since(begin))
	e.check(ins)
}
