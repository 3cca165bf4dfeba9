package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// previousClaim is the claim statement of the runtime before the claim read
// first (v0 of the one-statement claim): it always tries the insert, saves
// the lock_timeout in a placeholder setting, and reads the held row with a
// join. Its columns are today's, so one decoder serves both.
const previousClaim = `WITH claim AS (
    INSERT INTO "idempotency_keys" (scope, method, key, fingerprint, status, created_at, expires_at, intention)
    SELECT $2, $3, $4, $5, 'done', coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()) + $6::bigint * interval '1 microsecond', $7
    FROM (SELECT set_config('lock_timeout', $8, true)
          FROM (SELECT set_config('idemgen.lock_timeout', current_setting('lock_timeout'), true) OFFSET 0) AS saved
          OFFSET 0) AS claim_wait
    ON CONFLICT (scope, method, key) DO NOTHING
    RETURNING fence)
SELECT claimed.fence, r.fingerprint, r.status, r.response, r.error_name, r.error_message, r.steps, r.fence, r.intention,
       r.expires_at <= coalesce($1::timestamptz, now()) AND (r.locked_until IS NULL OR r.locked_until <= coalesce($1::timestamptz, now())) AS expired,
       r.locked_until, coalesce($1::timestamptz, now()) AS now,
       coalesce(current_setting('synchronous_standby_names', true) <> ''
    AND current_setting('synchronous_commit', true) IN ('on', 'remote_write', 'remote_apply'), false) AS sync_rep,
       set_config('lock_timeout', current_setting('idemgen.lock_timeout'), true)
FROM (SELECT max(fence) AS fence FROM claim) AS claimed
LEFT JOIN "idempotency_keys" AS r ON r.scope = $2 AND r.method = $3 AND r.key = $4`

// TestRollingUpgrade runs servers of the previous runtime and of today's on
// one ledger at once, as a rolling upgrade does: twins split between them
// run the body once per key and all get its answer, a key either one
// claimed replays on the other, a reused key is a mismatch on both, and an
// expired key is taken over by either.
func TestRollingUpgrade(t *testing.T) {
	e := newEnv(t)
	old, err := idem.NewStore(e.db.Pool, idem.WithClock(e.clock.Now), idem.WithBackoff(time.Millisecond))
	require.NoError(t, err)
	idem.UseClaimStatement(old, previousClaim)
	stores := [2]*idem.Store{old, e.store}
	var ran atomic.Int64 // bodies run, on either runtime
	call := func(s *idem.Store, key, req string, amount int64) result {
		ctx, o := idem.ContextWithOutcome(keyed(key))
		r, err := idem.Atomic(ctx, s, e.m, fp(req), func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
			ran.Add(1)
			return charge(amount)(ctx, tx)
		})
		return result{r, err, o.Replayed()}
	}

	const keys, twins = 8, 16
	for k := range keys {
		key := fmt.Sprintf("upgrade-%d", k)
		res := idemtest.Storm(t, twins, func(i int) result { return call(stores[i%2], key, "100", 100) })
		for i, r := range res {
			require.NoError(t, r.err, "%s, twin %d (%s runtime)", key, i, []string{"previous", "today's"}[i%2])
			assert.Equal(t, res[0].r, r.r, "%s, twin %d: every twin gets the one answer", key, i)
		}
	}
	assert.Equal(t, int64(keys), ran.Load(), "the body ran once per key")
	assert.Equal(t, keys, e.count(t, "payments"), "one payment per key")
	assert.Equal(t, keys, e.count(t, "idempotency_keys"))

	for i, s := range stores {
		first := call(s, fmt.Sprintf("one-%d", i), "100", 100)
		require.NoError(t, first.err)
		again := call(stores[1-i], fmt.Sprintf("one-%d", i), "100", 100)
		require.NoError(t, again.err)
		assert.True(t, again.replayed, "a key the %d-th runtime claimed replays on the other", i)
		assert.Equal(t, first.r, again.r)
		other := call(stores[1-i], fmt.Sprintf("one-%d", i), "999", 999)
		assert.ErrorIs(t, other.err, idem.ErrMismatch)
	}

	e.clock.Advance(retention + time.Minute)
	for i, s := range stores {
		r := call(s, fmt.Sprintf("one-%d", i), "100", 100)
		require.NoError(t, r.err)
		assert.False(t, r.replayed, "an expired key is claimed again by either runtime")
	}
	assert.Equal(t, keys+4, e.count(t, "payments"))
}
