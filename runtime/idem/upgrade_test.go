package idem_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The previous runtime's atomic protocol, claim first, kept here only to
// prove that it and today's run on one ledger at once (a rolling upgrade):
// BEGIN with previousClaim, which inserts the key's row (or reads the row
// that holds it), the body, then previousFinish, which stores the response
// in that row, with COMMIT. An expired row is taken over by
// previousTakeover before the body.

// previousClaim is the previous runtime's claim statement.
const previousClaim = `WITH held AS MATERIALIZED (
    SELECT * FROM "idempotency_keys" WHERE scope = $2 AND method = $3 AND key = $4),
saved AS MATERIALIZED (SELECT current_setting('lock_timeout') AS lock_timeout),
claim AS (
    INSERT INTO "idempotency_keys" (scope, method, key, fingerprint, status, created_at, expires_at, intention)
    SELECT $2, $3, $4, $5, 'done', coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()) + $6::bigint * interval '1 microsecond', $7
    FROM (SELECT set_config('lock_timeout', $8, true) FROM saved OFFSET 0) AS claim_wait
    WHERE NOT EXISTS (SELECT FROM held)
    ON CONFLICT (scope, method, key) DO NOTHING
    RETURNING fence)
SELECT claimed.fence, r.fingerprint, r.status, r.response, r.fence,
       r.expires_at <= coalesce($1::timestamptz, now()) AND (r.locked_until IS NULL OR r.locked_until <= coalesce($1::timestamptz, now())) AS expired,
       set_config('lock_timeout', (SELECT lock_timeout FROM saved), true)
FROM (SELECT max(fence) AS fence FROM claim) AS claimed
LEFT JOIN held AS r ON true`

// previousTakeover is the previous runtime's takeover of an expired row.
const previousTakeover = `UPDATE "idempotency_keys" AS t
SET fingerprint = $5, status = 'done', response = NULL, error_name = NULL, error_message = NULL,
    steps = '{}', fence = fence + 1, created_at = coalesce($1::timestamptz, now()),
    expires_at = coalesce($1::timestamptz, now()) + $6::bigint * interval '1 microsecond', locked_until = NULL, intention = $7
WHERE scope = $2 AND method = $3 AND key = $4
  AND (t.expires_at <= coalesce($1::timestamptz, now()) AND (t.locked_until IS NULL OR t.locked_until <= coalesce($1::timestamptz, now())))
RETURNING fence`

// previousFinish is the previous runtime's finish statement.
const previousFinish = `WITH stored AS (
    UPDATE "idempotency_keys" SET response = $4, error_name = $5, error_message = $6
    WHERE scope = $1 AND method = $2 AND key = $3 AND fence = $7
    RETURNING 1)
SELECT 1 / (count(*) = 1)::int FROM stored`

// previousRead is the previous runtime's read of a row its claim waited
// for.
const previousRead = `SELECT fingerprint, status, response FROM "idempotency_keys" WHERE scope = '' AND method = $1 AND key = $2`

// previousAtomic is one call of the previous runtime's Atomic (pgx, no
// scope, the default codec) on e's ledger: what it answers, whether it
// replayed, and whether its body's work committed.
func previousAtomic(ctx context.Context, e *env, key, req string, body func(context.Context, pgx.Tx) (Receipt, error)) (out result, committed bool) {
	for range 50 {
		out, committed, again := previousAttempt(ctx, e, key, req, body)
		if !again {
			return out, committed
		}
		time.Sleep(time.Millisecond)
	}
	return result{err: errors.New("previous runtime: attempts ran out")}, false
}

// previousAttempt is one attempt of previousAtomic; again asks for
// another (the row vanished, or a serialization failure).
func previousAttempt(ctx context.Context, e *env, key, req string, body func(context.Context, pgx.Tx) (Receipt, error)) (out result, committed, again bool) {
	conn, err := e.db.Pool.Acquire(ctx)
	if err != nil {
		return result{err: err}, false, false
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return result{err: err}, false, false
	}
	defer func() { _ = tx.Rollback(ctx) }()
	now := e.clock.Now()
	var (
		claimed, fence        pgtype.Int8
		fingerprint, response []byte
		status                pgtype.Text
		expired               pgtype.Bool
		waitRestored          string
		intention             = pgtype.UUID{Valid: true}
	)
	_, _ = rand.Read(intention.Bytes[:])
	err = tx.QueryRow(ctx, previousClaim, now, "", e.m.Name, key, fp(req), retention.Microseconds(), intention, "5000ms").
		Scan(&claimed, &fingerprint, &status, &response, &fence, &expired, &waitRestored)
	if err != nil {
		return result{err: err}, false, retryablePG(err)
	}
	if !claimed.Valid && !status.Valid {
		// The claim waited for a twin's commit: read its row.
		err = tx.QueryRow(ctx, previousRead, e.m.Name, key).Scan(&fingerprint, &status, &response)
		if errors.Is(err, pgx.ErrNoRows) {
			return result{}, false, true
		}
		if err != nil {
			return result{err: err}, false, false
		}
		expired = pgtype.Bool{Valid: true}
	}
	f := claimed.Int64
	switch {
	case claimed.Valid:
	case !expired.Bool:
		if string(fingerprint) != string(fp(req)) {
			return result{err: idem.ErrMismatch}, false, false
		}
		var r Receipt
		if err := json.Unmarshal(response, &r); err != nil {
			return result{err: err}, false, false
		}
		return result{r: r, replayed: true}, false, false
	default:
		err := tx.QueryRow(ctx, previousTakeover, now, "", e.m.Name, key, fp(req), retention.Microseconds(), intention).Scan(&f)
		if errors.Is(err, pgx.ErrNoRows) {
			return result{}, false, true
		}
		if err != nil {
			return result{err: err}, false, retryablePG(err)
		}
	}
	r, err := body(ctx, tx)
	if err != nil {
		return result{err: err}, false, retryablePG(err) // the whole attempt again, as Atomic does
	}
	resp, err := json.Marshal(r)
	if err != nil {
		return result{err: err}, false, false
	}
	b := &pgx.Batch{}
	b.Queue(previousFinish, "", e.m.Name, key, resp, nil, nil, f)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return result{err: err}, false, retryablePG(err)
	}
	return result{r: r}, true, false
}

// retryablePG reports a serialization failure or a deadlock.
func retryablePG(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// TestRollingUpgrade runs the previous runtime (claim first) and today's
// (write once) on one ledger at once, as a rolling upgrade does: twins
// split between them commit one payment per key and all get its answer, a
// key either one recorded replays on the other, a reused key is a mismatch
// on both, and an expired key is taken over by either.
func TestRollingUpgrade(t *testing.T) {
	e := newEnv(t)
	var committed atomic.Int64 // bodies whose work committed, on the previous runtime
	call := func(i int, key, req string, amount int64) result {
		if i%2 == 0 {
			r, ok := previousAtomic(context.Background(), e, key, req, charge(amount))
			if ok {
				committed.Add(1)
			}
			return r
		}
		return e.call(keyed(key), req, amount)
	}
	runtimes := []string{"previous", "today's"}

	const keys, twins = 8, 16
	for k := range keys {
		key := fmt.Sprintf("upgrade-%d", k)
		res := idemtest.Storm(t, twins, func(i int) result { return call(i, key, "100", 100) })
		fresh := 0
		for i, r := range res {
			require.NoError(t, r.err, "%s, twin %d (%s runtime)", key, i, runtimes[i%2])
			assert.Equal(t, res[0].r, r.r, "%s, twin %d: every twin gets the one answer", key, i)
			if !r.replayed {
				fresh++
			}
		}
		assert.Equal(t, 1, fresh, "%s: one twin's answer is its own, every other one's a replay", key)
	}
	assert.Equal(t, keys, e.count(t, "payments"), "one payment per key")
	assert.Equal(t, keys, e.count(t, "idempotency_keys"))

	for i := range 2 {
		key := fmt.Sprintf("one-%d", i)
		first := call(i, key, "100", 100)
		require.NoError(t, first.err)
		again := call(i+1, key, "100", 100)
		require.NoError(t, again.err)
		assert.True(t, again.replayed, "a key the %s runtime recorded replays on the other", runtimes[i])
		assert.Equal(t, first.r, again.r)
		other := call(i+1, key, "999", 999)
		assert.ErrorIs(t, other.err, idem.ErrMismatch)
	}
	assert.Equal(t, keys+2, e.count(t, "payments"))

	e.clock.Advance(retention + time.Minute)
	for i := range 2 {
		r := call(i+1, fmt.Sprintf("one-%d", i), "100", 100)
		require.NoError(t, r.err)
		assert.False(t, r.replayed, "an expired key is taken over by either runtime")
	}
	assert.Equal(t, keys+4, e.count(t, "payments"))

	// Twins on an expired key, split between the runtimes: one takeover.
	e.clock.Advance(retention + time.Minute)
	res := idemtest.Storm(t, twins, func(i int) result { return call(i, "one-0", "100", 100) })
	for i, r := range res {
		require.NoError(t, r.err, "twin %d (%s runtime)", i, runtimes[i%2])
		assert.Equal(t, res[0].r, r.r, "twin %d", i)
	}
	assert.Equal(t, keys+5, e.count(t, "payments"), "one takeover of the expired key")
}

// TestRollingUpgradeSharedRow is the rolling upgrade's storm with a body
// that locks a business row its twins share (the key's account, debited
// before the payment): 64 keys × 8 twins at once, split between two
// runtimes on one ledger. Every pairing keeps the promise (one payment and
// one debit per key, one answer); what differs is how the twins' locks
// meet. Twins of today's runtime queue on the key's lock before their
// bodies, then lock the account, then the ledger row, and so do those of
// the runtime just before it, which looked every key up first (a store
// made WithLookupFirst sends its statements); the write-once
// runtime before it (no key lock) locks the account, then the ledger row,
// the same order; the claim-first runtime before that locks the ledger row
// first, then the account: the opposite order, so its twins and today's can
// deadlock (PostgreSQL finds it after deadlock_timeout and one side
// retries). The test logs the deadlocks pg_stat_database counted and the
// storm's time for each pairing (go test -run RollingUpgradeSharedRow -v);
// docs and the README's upgrade note quote them. It asserts the promise,
// not the times.
func TestRollingUpgradeSharedRow(t *testing.T) {
	const keys, twins = 64, 8
	type runtime func(e *env, writeOnce *idem.Store, key string) result
	debit := func(key string) func(context.Context, pgx.Tx) (Receipt, error) {
		return func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
			if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 100 WHERE id = $1`, key); err != nil {
				return Receipt{}, err
			}
			return charge(100)(ctx, tx)
		}
	}
	claimFirst := func(e *env, _ *idem.Store, key string) result {
		r, _ := previousAtomic(context.Background(), e, key, "100", debit(key))
		return r
	}
	writeOnce := func(_ *env, s *idem.Store, key string) result {
		ctx, o := idem.ContextWithOutcome(keyed(key))
		r, err := idem.Atomic(ctx, s, chargeMethod(), fp("100"), debit(key))
		return result{r, err, o.Replayed()}
	}
	today := func(e *env, _ *idem.Store, key string) result {
		ctx, o := idem.ContextWithOutcome(keyed(key))
		r, err := idem.Atomic(ctx, e.store, e.m, fp("100"), debit(key))
		return result{r, err, o.Replayed()}
	}
	// lookupFirst is the runtime just before first attempts skipped the
	// lookup: the key's lock, every call looking its key up first (a store
	// made WithLookupFirst sends its statements), made for each pairing.
	var lookupFirstStore *idem.Store
	lookupFirst := func(_ *env, _ *idem.Store, key string) result {
		ctx, o := idem.ContextWithOutcome(keyed(key))
		r, err := idem.Atomic(ctx, lookupFirstStore, chargeMethod(), fp("100"), debit(key))
		return result{r, err, o.Replayed()}
	}
	pairings := []struct {
		name string
		a, b runtime
		// deadlockTimeout, if set, is the database's deadlock_timeout
		// during the storm (the upgrade note's procedure).
		deadlockTimeout string
	}{
		{name: "today's alone", a: today, b: today},
		{name: "write-once alone", a: writeOnce, b: writeOnce},
		{name: "claim-first alone", a: claimFirst, b: claimFirst},
		{name: "write-once and today's", a: writeOnce, b: today},
		{name: "lookup-first and today's", a: lookupFirst, b: today},
		{name: "claim-first and today's", a: claimFirst, b: today},
		{name: "claim-first and today's, deadlock_timeout 50ms", a: claimFirst, b: today, deadlockTimeout: "50ms"},
	}
	var table []string
	for _, p := range pairings {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, idem.WithMaxAttempts(50))
			wo, err := idem.NewStore(e.db.Pool, idem.WithClock(e.clock.Now), idem.WithMaxAttempts(50), idem.WithBackoff(time.Millisecond), idem.WithoutKeyLock())
			require.NoError(t, err)
			lookupFirstStore, err = idem.NewStore(e.db.Pool, idem.WithClock(e.clock.Now), idem.WithMaxAttempts(50), idem.WithBackoff(time.Millisecond), idem.WithLookupFirst())
			require.NoError(t, err)
			require.NoError(t, e.exec(`CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)`))
			require.NoError(t, e.exec(`INSERT INTO accounts SELECT 'k' || i, 0 FROM generate_series(0, 63) AS i`))
			if p.deadlockTimeout != "" {
				// For the connections the storm opens (deadlocks resets the
				// pool).
				var db string
				require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db))
				require.NoError(t, e.exec(`ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET deadlock_timeout = '`+p.deadlockTimeout+`'`))
			}
			before := e.deadlocks(t)
			res := make([][twins]result, keys)
			start := time.Now()
			var wg sync.WaitGroup
			for k := range keys {
				for i := range twins {
					run := p.a
					if i%2 == 1 {
						run = p.b
					}
					wg.Go(func() { res[k][i] = run(e, wo, fmt.Sprintf("k%d", k)) })
				}
			}
			wg.Wait()
			took := time.Since(start)
			deadlocks := e.deadlocks(t) - before
			inProgress := 0
			for k := range keys {
				fresh := 0
				var answer *Receipt
				for i, r := range res[k] {
					var ip *idem.InProgressError
					if errors.As(r.err, &ip) {
						inProgress++
						continue
					}
					require.NoError(t, r.err, "key k%d, twin %d", k, i)
					if answer == nil {
						answer = &r.r
					}
					assert.Equal(t, *answer, r.r, "key k%d, twin %d: one answer", k, i)
					if !r.replayed {
						fresh++
					}
				}
				assert.LessOrEqual(t, fresh, 1, "key k%d: at most one answer of its own", k)
			}
			var payments, debited int64
			require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM accounts WHERE balance <> 0)`).Scan(&payments, &debited))
			assert.EqualValues(t, keys, payments, "one payment per key")
			assert.EqualValues(t, keys, debited, "each account debited")
			var once int64
			require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM accounts WHERE balance = -100`).Scan(&once))
			assert.EqualValues(t, keys, once, "each account debited once")
			line := fmt.Sprintf("%-48s deadlocks %3d  storm %7s  in progress %d", p.name, deadlocks, took.Round(10*time.Millisecond), inProgress)
			table = append(table, line)
			t.Log(line)
		})
	}
	t.Logf("%d keys × %d twins, a body that debits the key's account:\n%s", keys, twins, strings.Join(table, "\n"))
}
