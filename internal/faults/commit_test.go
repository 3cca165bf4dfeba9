package faults

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestCommitAcknowledgementLost loses the answer to COMMIT, again and again,
// under a load: when an armed atomic body has run, every byte from the server
// to the clients is dropped (a toxiproxy timeout toxic on the downstream
// stream); once the key's ledger row is visible from another connection (the
// COMMIT ran) every connection is cut. The caller cannot know whether its
// transaction committed; the ledger row must settle it. External calls caught
// by the same cuts settle too: a finalise whose answer was lost leaves the
// key locked until its lock expires (then a takeover replays the recorded
// step), and a step whose result could not be recorded settles as an
// outcome stored as unknown (ErrOutcomeNotRecorded, replayed): check counts
// both as settled and still asserts at most one effect each.
func TestCommitAcknowledgementLost(t *testing.T) {
	rounds := size(5, 10)
	var armed atomic.Bool
	type fired struct {
		ev       idem.Event
		returned <-chan struct{}
		err      error
	}
	hit := make(chan fired, 1)
	var e *env
	// In exec mode each statement travels in one round trip, so the
	// finish-and-COMMIT batch is on the wire when the toxic goes in; in the
	// default mode a statement's first use on a connection prepares it first,
	// and the toxic would swallow that instead.
	e = newEnv(t, "COMMIT acknowledgement lost", envConfig{execMode: pgx.QueryExecModeExec, executed: func(ctx context.Context, ev idem.Event) {
		if ev.Err == nil && ev.Method == e.svc.charge.Name && armed.CompareAndSwap(true, false) {
			hit <- fired{ev, callReturned(ctx), e.tryAddToxic("lose-ack", "timeout", "downstream", `{"timeout":0}`)}
		}
	}})
	ins := withInline(intents("commit", size(40, 400), size(10, 100)), "commit", size(10, 100))
	wait := e.storm(ins, 4)
	lost, tries := 0, 0
	for lost < rounds && tries < 4*rounds {
		tries++
		armed.Store(true)
		var f fired
		select {
		case f = <-hit:
		case <-e.allReturned():
			t.Fatalf("the load ended after %d lost acknowledgements of %d", lost, rounds)
		}
		require.NoError(t, f.err)
		committed := false
		e.waitFor("the armed COMMIT to run or its call to return", func() bool {
			err := e.db.Pool.QueryRow(context.Background(),
				`SELECT response IS NOT NULL FROM `+idem.DefaultTable+` WHERE scope = $1 AND method = $2 AND key = $3`,
				f.ev.Scope, f.ev.Method, f.ev.Key).Scan(&committed)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				require.NoError(t, err)
			}
			select {
			case <-f.returned: // it gave up (its deadline) before its COMMIT went out
				return true
			default:
				return committed
			}
		})
		e.proxy.Stop() // every connection cut: the COMMIT's answer is gone
		e.removeToxic("lose-ack")
		require.NoError(t, e.proxy.Start())
		if committed {
			lost++
		}
	}
	wait()
	require.Equal(t, rounds, lost, "COMMIT answers lost after the COMMIT ran, in %d tries", tries)
	e.check(ins)
}
