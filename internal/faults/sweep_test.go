package faults

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestSweepRacesLiveClaims runs Sweep in a tight loop (batches of two) and a
// Janitor (every millisecond) through a load of atomic and external calls
// whose keys are partly new and partly the keys of rows whose retention has
// ended: done rows, reused for new requests, and rows an attempt abandoned
// mid-work (in progress, lock run out), retried with their request. Claims
// race the sweeps for those rows (a takeover finds the row deleted under
// it, a sweep skips the row a takeover holds) and twins race both. A sweep
// that deleted a live row, or a claim that lost a row it had claimed, shows
// as a second effect (a new intention gets a new downstream key, so the bank
// moves the money again) or as an answer that is not the first.
func TestSweepRacesLiveClaims(t *testing.T) {
	// Flat out, so that the sweeps race the load as often as they can.
	e := newEnv(t, "Sweep and Janitor racing live claims and takeovers", envConfig{storeOpts: []idem.Option{idem.WithSweepShare(1)}})
	ctx := context.Background()

	// Rows whose retention has ended: made by a store whose clock is two
	// hours behind, with a one-hour retention.
	past := e.storeWith(idem.WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	pastSvc := newService(past, e.bank)
	old := intents("sweep-old", size(20, 500), size(20, 500))
	for _, in := range old {
		out := e.callWith(pastSvc, in, false)
		require.NoError(t, out.err, "%s", in.key)
	}
	// Abandoned attempts: the caller's context ends while the body is at
	// the bank, before any money moved, so the key stays in progress with
	// its lock (which ran out long ago on the store's clock).
	abandoned := intents("sweep-abandoned", 0, size(10, 250))
	for _, in := range abandoned {
		cctx, cancel := context.WithCancel(idem.ContextWithScope(idem.ContextWithKey(ctx, in.key), scope))
		e.bank.before = func(context.Context, string) error { cancel(); return context.Canceled }
		_, err := pastSvc.Payout(cctx, in.req)
		require.ErrorIs(t, err, context.Canceled, "%s", in.key)
		cancel()
	}
	e.bank.before = nil
	var expired int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+idem.DefaultTable+` WHERE expires_at <= now()`).Scan(&expired))
	require.Equal(t, len(old)+len(abandoned), expired, "rows whose retention has ended")

	// The load: new keys, every other old key reused for a new request, and
	// the abandoned keys retried with their request.
	live := intents("sweep-new", size(20, 500), size(20, 500))
	reused := map[string]bool{}
	for i, in := range old {
		if i%2 == 0 {
			in.req.Memo += " again"
			in.req.Amount++
			live = append(live, in)
			reused[in.key] = true
		}
	}
	live = append(live, abandoned...)

	sctx, stop := context.WithCancel(ctx)
	var swept atomic.Int64
	var sweepers sync.WaitGroup
	sweepers.Go(func() {
		for sctx.Err() == nil {
			n, err := e.store.Sweep(sctx, 2)
			swept.Add(n)
			if err != nil && sctx.Err() == nil {
				t.Errorf("sweep: %v", err)
				return
			}
		}
	})
	janitor, err := e.store.StartJanitor(sctx, time.Millisecond, 3)
	require.NoError(t, err)
	e.storm(live, 4)()
	stop()
	sweepers.Wait()
	<-janitor

	// Once the sweeps have run to the end, the old rows that were not reused
	// are gone and every row the load made is there.
	_, err = e.store.Sweep(ctx, 0)
	require.NoError(t, err)
	var left, kept int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE key LIKE 'sweep-old-%' AND NOT key = ANY($1)),
		count(*) FILTER (WHERE key = ANY($2))
		FROM `+idem.DefaultTable, keysOf(old, func(in intent) bool { return reused[in.key] }), keysOf(live, nil)).Scan(&left, &kept))
	assert.Zero(t, left, "old rows not reused are swept")
	assert.Equal(t, len(live), kept, "rows of the load")
	t.Logf("the racing sweeps deleted %d rows", swept.Load())
	assert.Positive(t, swept.Load(), "the sweeps deleted rows while the load ran")
	e.check(append(old, live...))
}

// keysOf returns the keys of the intentions keep accepts (all if keep is nil).
func keysOf(ins []intent, keep func(intent) bool) []string {
	ks := []string{}
	for _, in := range ins {
		if keep == nil || keep(in) {
			ks = append(ks, in.key)
		}
	}
	return ks
}
