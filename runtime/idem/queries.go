package idem

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// queries holds the SQL for one ledger table. Statements that need the time
// are written with it as $1 and their other parameters from $2; a store
// reads the time from one clock, picked once (atClock): the database's
// now(), in production (one clock for every application server), or the
// store's (WithClock: tests step past windows without sleeping), sent as
// $1. No statement chooses between the two (coalesce($1, now())): Citus
// routes a statement to one shard only if what it computes from the time
// is the time itself, and refuses a stable function chosen by a CASE or a
// COALESCE in an UPDATE or in ON CONFLICT DO UPDATE. Scope, method and key
// follow as $2..$4 (as $1..$3 in statements that need no time).
//
// Every statement a call sends names the key's scope with an equality, and
// none holds a subquery on another shard, so on a ledger distributed by
// scope (docs/ha.md) each routes to the key's shard.
type queries struct {
	read, recordInTx, claimExternal, finishExternal, release, extend, step, stepLegacy, sweep, mismatch string
	// record is Atomic's record statement; recordCitus is atomic mode's
	// record on Citus (Atomic, and AtomicInTx as its takeover form).
	record, recordCitus recordStmts
	// mismatchCitus is the mismatch record on Citus (citusSetup).
	mismatchCitus string
}

// recordStmts are the two forms of Atomic's record statement. fresh, when
// the lookup found no row, is a plain INSERT: a row a twin committed since
// makes it fail on the ledger's unique index (23505, errKeyTaken), and
// plain, it costs the server less than an ON CONFLICT insert (the
// arbiter's probe and the speculative insertion, docs/performance.md).
// takeover, when the lookup found an expired row, is the INSERT … ON
// CONFLICT DO UPDATE that takes that row over. fresh has takeover's
// parameters but the fence the lookup saw ($9, always 0 there), so the
// ones after it are one lower (Store.record leaves it out).
type recordStmts struct{ fresh, takeover string }

// form returns the fresh form or the takeover form.
func (r recordStmts) form(fresh bool) string {
	if fresh {
		return r.fresh
	}
	return r.takeover
}

func newQueries(table string, clock bool) queries {
	const now = "$1::timestamptz"
	const pk = "scope = $2 AND method = $3 AND key = $4"
	const pk1 = "scope = $1 AND method = $2 AND key = $3"
	// reclaimable: the existing row t may start a new intention, because its
	// retention ended and no attempt holds a live lock on it. In ON
	// CONFLICT DO UPDATE the time is the row proposed's created_at (the
	// clock's, read once for the statement), so that clause computes
	// nothing from a function.
	const reclaimable = "(t.expires_at <= excluded.created_at AND (t.locked_until IS NULL OR t.locked_until <= excluded.created_at))"
	// rowColumns are the columns of a row read back (scanRow's order), from
	// the row aliased r. expired means a claim may start a new intention on
	// the row: its retention ended and no attempt holds a live lock on it.
	// sync_rep says whether the session's commits wait for a synchronous
	// standby (replication.go): a replay needs to know, and asking here
	// costs no statement of its own.
	const rowColumns = `r.fingerprint, r.status, r.response, r.error_name, r.error_message, r.fence, r.intention,
       r.expires_at <= ` + now + ` AND (r.locked_until IS NULL OR r.locked_until <= ` + now + `) AS expired, r.locked_until, ` + now + ` AS now,
       ` + syncRepColumn + ` AS sync_rep`
	q := queries{
		// read: the key's row. Atomic mode's lookup (before the body, and
		// after an attempt that lost), and the read of a row external
		// mode's claim did not get.
		read: fmt.Sprintf(`SELECT %[2]s
FROM %[1]s AS r WHERE r.scope = $2 AND r.method = $3 AND r.key = $4`, table, rowColumns),

		// record (Atomic): writes the key's row, once, with the outcome,
		// in the body's transaction; COMMIT follows in the same round
		// trip. The lookup before the body found no row (fresh: a plain
		// INSERT) or an expired one whose fence was $9 (takeover: the
		// insert takes it over as a new intention with fence $8 = $9 + 1).
		// Any other row, committed by a twin since the lookup, refuses the
		// record: the fresh form fails on the ledger's unique index, the
		// takeover form divides by zero (recordConflict). Either aborts the
		// transaction, and the pipelined COMMIT rolls the body's work back.
		//
		// A twin's row not yet committed makes the insert wait for the twin
		// to end. That wait is bounded by the store's claim wait ($13): a
		// transaction-local lock_timeout set just before the row to insert
		// is made (OFFSET 0 keeps that step in its place). Nothing runs
		// after it in the attempt's transaction, so it is not put back.
		record: recordForms(table, now, "SELECT ", "\n    FROM (SELECT set_config('lock_timeout', $13, true) OFFSET 0) AS claim_wait", reclaimable),

		// recordInTx (AtomicInTx): record under a savepoint in the caller's
		// transaction, RELEASE following in the same round trip. The
		// lock_timeout in force is saved before the claim wait replaces it
		// (saved is read first, by the set_config that changes it) and put
		// back once the insert is over (the outer query reads the insert's
		// row first), so the caller's transaction goes on with its own
		// setting. It has the takeover form only: under a REPEATABLE READ
		// caller's snapshot, a twin's row the snapshot cannot see makes
		// the upsert fail with a serialization failure (40001), which the
		// caller retries its transaction on, where a plain INSERT would
		// fail with a unique violation.
		recordInTx: fmt.Sprintf(`WITH saved AS MATERIALIZED (SELECT current_setting('lock_timeout') AS lock_timeout),
recorded AS (
    %[1]s
    RETURNING 1)
SELECT set_config('lock_timeout', (SELECT lock_timeout FROM saved), true)
FROM recorded`, fmt.Sprintf(recordInsert, table, now, "SELECT ", "\n    FROM (SELECT set_config('lock_timeout', $13, true) FROM saved OFFSET 0) AS claim_wait", reclaimable)),

		// recordCitus: record on Citus, an INSERT … VALUES, which Citus
		// routes to the key's shard (an INSERT … SELECT, or a CTE, it plans
		// on the coordinator). The claim wait cannot be set by the
		// statement: a lock_timeout set on the coordinator does not bound a
		// wait on the worker. It goes before, as SET LOCAL statements Citus
		// propagates to the worker (citusClaimWait); $13 is unused.
		recordCitus: recordForms(table, now, "VALUES (", ")", reclaimable),

		// claimExternal: commits an in-progress row with a lock. It starts a
		// new intention ($8) on a row whose retention ended, unless an
		// attempt holds a live lock on it, or takes over an in-progress row
		// for the same request whose lock ran out (the attempt holding it
		// crashed): a takeover keeps the intention and the recorded steps.
		// The row's retention never ends before its lock.
		claimExternal: fmt.Sprintf(`INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, created_at, expires_at, locked_until, intention)
VALUES ($2, $3, $4, $5, 'in_progress', %[2]s, greatest(%[2]s + $6::bigint * interval '1 microsecond', %[2]s + $7::bigint * interval '1 microsecond'),
        %[2]s + $7::bigint * interval '1 microsecond', $8)
ON CONFLICT (scope, method, key) DO UPDATE
SET status = 'in_progress', fence = t.fence + 1, locked_until = excluded.locked_until,
    fingerprint = excluded.fingerprint, response = NULL, error_name = NULL, error_message = NULL,
    steps = CASE WHEN %[3]s THEN '{}'::jsonb ELSE t.steps END,
    created_at = CASE WHEN %[3]s THEN excluded.created_at ELSE t.created_at END,
    expires_at = greatest(CASE WHEN %[3]s THEN excluded.expires_at ELSE t.expires_at END, excluded.locked_until),
    intention = CASE WHEN %[3]s THEN excluded.intention ELSE t.intention END
WHERE %[3]s
   OR (t.status = 'in_progress' AND t.fingerprint = excluded.fingerprint AND t.locked_until <= excluded.created_at)
RETURNING fence, steps, intention, t.fence > 1 AS taken_over`, table, now, reclaimable),

		// finishExternal: compare-and-set on the fencing token (intention,
		// fence), which never repeats for a key; 0 rows means the lock was
		// lost and the result of the attempt that took over stands.
		finishExternal: fmt.Sprintf(`UPDATE %[1]s SET status = 'done', response = $4, error_name = $5, error_message = $6, locked_until = NULL
WHERE %[2]s AND fence = $7 AND intention IS NOT DISTINCT FROM $8::uuid AND status = 'in_progress'`, table, pk1),

		// release: a non-final error lets a retry take the key over at once.
		// The row stays, so recorded steps are not lost and a retry with a
		// different request is still a mismatch.
		release: fmt.Sprintf(`UPDATE %[1]s SET locked_until = %[2]s
WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $6::uuid AND status = 'in_progress'`, table, now, pk),

		// extend: the heartbeat of long external work. The retention window
		// is pushed out with the lock, so a live call is never reclaimed.
		extend: fmt.Sprintf(`UPDATE %[1]s SET locked_until = %[2]s + $6::bigint * interval '1 microsecond',
    expires_at = greatest(expires_at, %[2]s + $6::bigint * interval '1 microsecond')
WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $7::uuid AND status = 'in_progress'`, table, now, pk),

		// step: records a completed recovery point: its result's JSON text,
		// as a JSON string (jsonb refuses a NUL character; the text escapes
		// it). stepLegacy stores the result itself, on rows claimed before
		// intentions were recorded.
		step: fmt.Sprintf(`UPDATE %[1]s SET steps = jsonb_set(steps, ARRAY[$5::text], to_jsonb($6::text))
WHERE %[2]s AND fence = $4 AND intention IS NOT DISTINCT FROM $7::uuid AND status = 'in_progress'`, table, pk1),
		stepLegacy: fmt.Sprintf(`UPDATE %[1]s SET steps = jsonb_set(steps, ARRAY[$5::text], $6::jsonb)
WHERE %[2]s AND fence = $4 AND intention IS NOT DISTINCT FROM $7::uuid AND status = 'in_progress'`, table, pk1),

		// mismatch: records the request last refused for another
		// fingerprint ($7) on the row the refusal read (its fence $5 and
		// intention $6: a row taken over or reused since is left as is).
		// It never waits for a row lock (a row another statement holds at
		// that moment is left as is), and its commit waits neither for the
		// disk nor for a synchronous standby (synchronous_commit off, for
		// this transaction only): the record is for operators, and a crash
		// that loses it loses no answer.
		mismatch: fmt.Sprintf(mismatchUpdate, table, now, pk, "\nFROM (SELECT set_config('synchronous_commit', 'off', true)) AS no_wait"),
		// mismatchCitus: mismatch on Citus, which refuses a volatile
		// function (set_config) in an UPDATE: the same record, whose
		// commit waits as the worker's commits do.
		mismatchCitus: fmt.Sprintf(mismatchUpdate, table, now, pk, ""),

		// sweep: one batch of expired rows, oldest first, skipping rows a
		// claim holds, so live traffic is never blocked by cleanup. A row
		// whose lock is live is never deleted, whatever its expires_at.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s WHERE (scope, method, key) IN (
    SELECT scope, method, key FROM %[1]s WHERE expires_at <= %[2]s AND (locked_until IS NULL OR locked_until <= %[2]s)
    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, table, now),
	}
	if clock {
		return q
	}
	for _, p := range []*string{&q.read, &q.record.fresh, &q.record.takeover, &q.recordInTx, &q.recordCitus.fresh,
		&q.recordCitus.takeover, &q.claimExternal, &q.release, &q.extend, &q.sweep, &q.mismatch, &q.mismatchCitus} {
		*p = atDatabaseClock(*p)
	}
	return q
}

// param matches a statement's parameter.
var param = regexp.MustCompile(`\$([0-9]+)`)

// atDatabaseClock rewrites a statement written with the time as $1 for the
// database's clock: now() in place of $1, and the other parameters one
// lower (Store.at leaves the time out of their arguments).
func atDatabaseClock(stmt string) string {
	stmt = strings.ReplaceAll(stmt, "$1::timestamptz", "now()")
	return param.ReplaceAllStringFunc(stmt, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(n-1)
	})
}

// recordForms are the two forms (recordStmts) of a record statement with
// recordInsert's arguments.
func recordForms(table, now, before, after, reclaimable string) recordStmts {
	takeover := fmt.Sprintf(recordInsert, table, now, before, after, reclaimable)
	fresh, _, _ := strings.Cut(takeover, "\n    ON CONFLICT")
	return recordStmts{fresh: withoutParam(fresh, 9), takeover: takeover}
}

// withoutParam renumbers the parameters of stmt, which does not use $n,
// after n one lower.
func withoutParam(stmt string, n int) string {
	return param.ReplaceAllStringFunc(stmt, func(p string) string {
		if k, _ := strconv.Atoi(p[1:]); k > n {
			return "$" + strconv.Itoa(k-1)
		}
		return p
	})
}

// recordInsert is the insert of atomic mode's record statements (record,
// recordInTx, recordCitus), over table (%[1]s), the time (%[2]s), the
// row's source around its values (%[3]s before, %[4]s after: a SELECT
// with the claim wait, or VALUES) and the condition of a row that may
// start a new intention (%[5]s). The conflict clause holds nothing but
// the row's columns and the proposed row's (excluded), so Citus routes it:
// a row that may not be taken over (any but an expired one with the fence
// the lookup saw) divides the fence by zero (recordConflict). Without the
// conflict clause, it is the fresh form (recordForms).
const recordInsert = `INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, response, error_name, error_message, fence, created_at, expires_at, intention)
    %[3]s$2, $3, $4, $5, 'done', $10, $11, $12, $8, %[2]s, %[2]s + $6::bigint * interval '1 microsecond', $7%[4]s
    ON CONFLICT (scope, method, key) DO UPDATE
    SET fingerprint = excluded.fingerprint, status = 'done', response = excluded.response,
        error_name = excluded.error_name, error_message = excluded.error_message, steps = '{}',
        fence = excluded.fence / (%[5]s AND t.fence = $9)::int,
        created_at = excluded.created_at, expires_at = excluded.expires_at,
        locked_until = NULL, intention = excluded.intention`

// mismatchUpdate is the mismatch record over table (%[1]s), the time
// (%[2]s) and the key (%[3]s), with %[4]s after its SET: the row the
// refusal read, unless another statement holds it (SKIP LOCKED), on the
// key's shard (the outer scope names it to Citus).
const mismatchUpdate = `UPDATE %[1]s AS t SET mismatch_at = %[2]s, mismatch_fingerprint = $7%[4]s
WHERE t.scope = $2 AND (t.scope, t.method, t.key) = (SELECT scope, method, key FROM %[1]s
    WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $6::uuid FOR UPDATE SKIP LOCKED)`

// The standby's statements (replication.go).

// syncRepColumn is true when the session's commits wait for a synchronous
// standby: a column of the read statement (rowColumns), so that
// a replay learns it with the row. A server that does not know the settings
// (a PostgreSQL-compatible one) reads them as NULL: false.
const syncRepColumn = `coalesce(current_setting('synchronous_standby_names', true) <> ''
    AND current_setting('synchronous_commit', true) IN ('on', 'remote_write', 'remote_apply'), false)`

// syncRepSQL answers one row when the session's commits wait for a
// synchronous standby, none otherwise (the command tag says which). It goes
// out with the inline lookup, in the same round trip.
const syncRepSQL = `SELECT 1 WHERE ` + syncRepColumn

// confirmReplicationSQL writes a record to the WAL in the transaction: an
// empty transactional logical decoding message (prefix "idem.confirm";
// logical decoding consumers see it and may skip it). PostgreSQL waits for
// the standby only on the commit of a transaction that wrote WAL (a
// transaction id alone is not enough), and this is the smallest such write
// any role may make, on any wal_level, touching no table.
const confirmReplicationSQL = `SELECT pg_logical_emit_message(true, 'idem.confirm', '')`

// confirmIfSyncRepSQL is confirmReplicationSQL when syncRepSQL would answer
// a row, and writes nothing otherwise: for a replay that has not asked.
const confirmIfSyncRepSQL = `SELECT CASE WHEN current_setting('synchronous_standby_names', true) <> ''
    AND current_setting('synchronous_commit', true) IN ('on', 'remote_write', 'remote_apply')
  THEN pg_logical_emit_message(true, 'idem.confirm', '') END`
