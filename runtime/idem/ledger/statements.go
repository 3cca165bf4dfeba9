package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// The ledger's statements: every statement the runtime (runtime/idem)
// sends to a ledger table, named, per mode and per clock, the Citus forms
// beside the plain ones. testdata/statements.golden holds their text for a
// sample table (TestStatementsGolden): a change to what the runtime sends
// shows there as a diff.
//
// Statements that need the time are written with it as $1 and their other
// parameters from $2; a store reads the time from one clock, picked once
// (Clock): the database's now(), in production (one clock for every
// application server), or the store's (idem.WithClock: tests step past
// windows without sleeping), sent as $1. No statement chooses between the
// two (coalesce($1, now())): Citus routes a statement to one shard only if
// what it computes from the time is the time itself, and refuses a stable
// function chosen by a CASE or a COALESCE in an UPDATE or in ON CONFLICT
// DO UPDATE. Scope, method and key follow as $2..$4 (as $1..$3 in
// statements that need no time).
//
// Every statement a call sends names the key's scope with an equality, and
// none holds a subquery on another shard, so on a ledger distributed by
// scope (docs/ha.md) each routes to the key's shard.

// Clock is the clock a store's statements read the time from.
type Clock int

const (
	// DatabaseClock reads the database's now(); parameters start at $1.
	DatabaseClock Clock = iota
	// StoreClock takes the time as $1, from the store's clock; the other
	// parameters start at $2.
	StoreClock
)

// Statements are the statements the runtime sends to one ledger table,
// reading the time from one clock.
type Statements struct {
	// Read is the key's row, its columns in the runtime's scanRow order
	// (readColumns). Atomic mode's lookup (before the body, and after an
	// attempt that lost), and the read of a row external mode's claim did
	// not get.
	Read string

	// Record is Atomic's record statement (RecordForms): it writes the
	// key's row, once, with the outcome, in the body's transaction; COMMIT
	// follows in the same round trip. The lookup before the body found no
	// row (fresh: a plain INSERT) or an expired one whose fence was $9
	// (takeover: the insert takes it over as a new intention with fence
	// $8 = $9 + 1). Any other row, committed by a twin since the lookup,
	// refuses the record: the fresh form fails on the ledger's unique
	// index, the takeover form divides by zero (recordInsert). Either
	// aborts the transaction, and the pipelined COMMIT rolls the body's
	// work back.
	//
	// A twin's row not yet committed makes the insert wait for the twin to
	// end. That wait is bounded by the store's claim wait ($13): a
	// transaction-local lock_timeout set just before the row to insert is
	// made (OFFSET 0 keeps that step in its place). Nothing runs after it
	// in the attempt's transaction, so it is not put back.
	Record RecordForms
	// RecordInTx (AtomicInTx) is Record under a savepoint in the caller's
	// transaction, RELEASE following in the same round trip. The
	// lock_timeout in force is saved before the claim wait replaces it
	// (saved is read first, by the set_config that changes it) and put
	// back once the insert is over (the outer query reads the insert's row
	// first), so the caller's transaction goes on with its own setting. It
	// has the takeover form only: under a REPEATABLE READ caller's
	// snapshot, a twin's row the snapshot cannot see makes the upsert fail
	// with a serialization failure (40001), which the caller retries its
	// transaction on, where a plain INSERT would fail with a unique
	// violation.
	RecordInTx string
	// RecordCitus is atomic mode's record on Citus (Atomic, and AtomicInTx
	// as its takeover form): an INSERT … VALUES, which Citus routes to the
	// key's shard (an INSERT … SELECT, or a CTE, it plans on the
	// coordinator). The claim wait cannot be set by the statement: a
	// lock_timeout set on the coordinator does not bound a wait on the
	// worker. It goes before, as SET LOCAL statements Citus propagates to
	// the worker (CitusClaimWait); $13 is unused.
	RecordCitus RecordForms

	// ClaimExternal commits an in-progress row with a lock. It starts a new
	// intention ($8) on a row whose retention ended, unless an attempt
	// holds a live lock on it, or takes over an in-progress row for the
	// same request whose lock ran out (the attempt holding it crashed): a
	// takeover keeps the intention and the recorded steps. The row's
	// retention never ends before its lock.
	ClaimExternal string
	// FinishExternal is a compare-and-set on the fencing token (intention,
	// fence), which never repeats for a key; 0 rows means the lock was lost
	// and the result of the attempt that took over stands.
	FinishExternal string
	// Release: a non-final error lets a retry take the key over at once.
	// The row stays, so recorded steps are not lost and a retry with a
	// different request is still a mismatch.
	Release string
	// Extend is the heartbeat of long external work. The retention window
	// is pushed out with the lock, so a live call is never reclaimed.
	Extend string
	// Step records a completed recovery point: its result's JSON text, as
	// a JSON string (jsonb refuses a NUL character; the text escapes it).
	// StepLegacy stores the result itself, on rows claimed before
	// intentions were recorded.
	Step, StepLegacy string

	// Mismatch records the request last refused for another fingerprint
	// ($7) on the row the refusal read (its fence $5 and intention $6: a
	// row taken over or reused since is left as is). It never waits for a
	// row lock (a row another statement holds at that moment is left as
	// is), and its commit waits neither for the disk nor for a synchronous
	// standby (synchronous_commit off, for this transaction only): the
	// record is for operators, and a crash that loses it loses no answer.
	Mismatch string
	// MismatchCitus is Mismatch on Citus, which refuses a volatile function
	// (set_config) in an UPDATE: the same record, whose commit waits as the
	// worker's commits do.
	MismatchCitus string

	// Sweep deletes one batch of expired rows ($2 rows), oldest first,
	// skipping rows a claim holds, so live traffic is never blocked by
	// cleanup. A row whose lock is live is never deleted, whatever its
	// expires_at. On Citus it runs per shard (ShardSweep).
	Sweep string
}

// RecordForms are the two forms of an atomic record statement. Fresh, when
// the lookup found no row, is a plain INSERT: a row a twin committed since
// makes it fail on the ledger's unique index (23505), and plain, it costs
// the server less than an ON CONFLICT insert (the arbiter's probe and the
// speculative insertion, docs/performance.md). Takeover, when the lookup
// found an expired row, is the INSERT … ON CONFLICT DO UPDATE that takes
// that row over. Fresh has Takeover's parameters but the fence the lookup
// saw ($9, always 0 there), so the ones after it are one lower (the store
// leaves it out of the arguments).
type RecordForms struct{ Fresh, Takeover string }

// Form returns the fresh form or the takeover form.
func (r RecordForms) Form(fresh bool) string {
	if fresh {
		return r.Fresh
	}
	return r.Takeover
}

// Statements returns the ledger's statements reading the time from clock.
func (l Schema) Statements(clock Clock) Statements {
	return newStatements(l.Table.Quoted(), clock)
}

// timeParam is the time as a statement's parameter (StoreClock), which
// atDatabaseClock replaces with now().
const timeParam = "$1::timestamptz"

// keyParams is the key's equality with the time as $1 (keyParams1: with no
// time).
const (
	keyParams  = "scope = $2 AND method = $3 AND key = $4"
	keyParams1 = "scope = $1 AND method = $2 AND key = $3"
)

// reclaimable: the existing row t may start a new intention, because its
// retention ended and no attempt holds a live lock on it. In ON CONFLICT DO
// UPDATE the time is the row proposed's created_at (the clock's, read once
// for the statement), so that clause computes nothing from a function.
const reclaimable = "(t.expires_at <= excluded.created_at AND (t.locked_until IS NULL OR t.locked_until <= excluded.created_at))"

// newStatements returns the statements on table (quoted) by clock.
func newStatements(table string, clock Clock) Statements {
	q := Statements{}
	atomicStatements(&q, table)
	externalStatements(&q, table)
	q.Mismatch = fmt.Sprintf(mismatchUpdate, table, timeParam, keyParams, "\nFROM (SELECT set_config('synchronous_commit', 'off', true)) AS no_wait")
	q.MismatchCitus = fmt.Sprintf(mismatchUpdate, table, timeParam, keyParams, "")
	q.Sweep = fmt.Sprintf(sweepDelete, table, timeParam, "$2")
	if clock == StoreClock {
		return q
	}
	for _, p := range []*string{&q.Read, &q.Record.Fresh, &q.Record.Takeover, &q.RecordInTx, &q.RecordCitus.Fresh,
		&q.RecordCitus.Takeover, &q.ClaimExternal, &q.Release, &q.Extend, &q.Sweep, &q.Mismatch, &q.MismatchCitus} {
		*p = atDatabaseClock(*p)
	}
	return q
}

// atomicStatements sets atomic mode's statements on table by the store's
// clock.
func atomicStatements(q *Statements, table string) {
	now := timeParam
	q.Read = fmt.Sprintf(readRow, table, readColumns)
	q.Record = recordForms(table, now, "SELECT ", "\n    FROM (SELECT set_config('lock_timeout', $13, true) OFFSET 0) AS claim_wait", reclaimable)
	q.RecordInTx = fmt.Sprintf(recordInTx, fmt.Sprintf(recordInsert, table, now, "SELECT ", "\n    FROM (SELECT set_config('lock_timeout', $13, true) FROM saved OFFSET 0) AS claim_wait", reclaimable))
	q.RecordCitus = recordForms(table, now, "VALUES (", ")", reclaimable)
}

// externalStatements sets external mode's statements on table by the
// store's clock.
func externalStatements(q *Statements, table string) {
	now := timeParam
	q.ClaimExternal = fmt.Sprintf(claimExternal, table, now, reclaimable)
	q.FinishExternal = fmt.Sprintf(finishExternal, table, keyParams1)
	q.Release = fmt.Sprintf(releaseLock, table, now, keyParams)
	q.Extend = fmt.Sprintf(extendLock, table, now, keyParams)
	q.Step = fmt.Sprintf(recordStep, table, keyParams1, "to_jsonb($6::text)")
	q.StepLegacy = fmt.Sprintf(recordStep, table, keyParams1, "$6::jsonb")
}

// readColumns are the columns of a row read back (the runtime's scanRow
// order), from the row aliased r. expired means a claim may start a new
// intention on the row: its retention ended and no attempt holds a live
// lock on it. sync_rep says whether the session's commits wait for a
// synchronous standby: a replay needs to know, and asking here costs no
// statement of its own.
const readColumns = `r.fingerprint, r.status, r.response, r.error_name, r.error_message, r.fence, r.intention,
       r.expires_at <= ` + timeParam + ` AND (r.locked_until IS NULL OR r.locked_until <= ` + timeParam + `) AS expired, r.locked_until, ` + timeParam + ` AS now,
       ` + syncRepColumn + ` AS sync_rep`

// readRow is the Read statement over table (%[1]s) and its columns
// (%[2]s).
const readRow = `SELECT %[2]s
FROM %[1]s AS r WHERE r.scope = $2 AND r.method = $3 AND r.key = $4`

// recordInTx wraps recordInsert (%[1]s) for AtomicInTx (RecordInTx).
const recordInTx = `WITH saved AS MATERIALIZED (SELECT current_setting('lock_timeout') AS lock_timeout),
recorded AS (
    %[1]s
    RETURNING 1)
SELECT set_config('lock_timeout', (SELECT lock_timeout FROM saved), true)
FROM recorded`

// recordForms are the two forms (RecordForms) of a record statement with
// recordInsert's arguments.
func recordForms(table, now, before, after, reclaimable string) RecordForms {
	takeover := fmt.Sprintf(recordInsert, table, now, before, after, reclaimable)
	fresh, _, _ := strings.Cut(takeover, "\n    ON CONFLICT")
	return RecordForms{Fresh: withoutParam(fresh, 9), Takeover: takeover}
}

// recordInsert is the insert of atomic mode's record statements (Record,
// RecordInTx, RecordCitus), over table (%[1]s), the time (%[2]s), the
// row's source around its values (%[3]s before, %[4]s after: a SELECT
// with the claim wait, or VALUES) and the condition of a row that may
// start a new intention (%[5]s). The conflict clause holds nothing but
// the row's columns and the proposed row's (excluded), so Citus routes it:
// a row that may not be taken over (any but an expired one with the fence
// the lookup saw) divides the fence by zero. Without the conflict clause,
// it is the fresh form (recordForms).
const recordInsert = `INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, response, error_name, error_message, fence, created_at, expires_at, intention)
    %[3]s$2, $3, $4, $5, 'done', $10, $11, $12, $8, %[2]s, %[2]s + $6::bigint * interval '1 microsecond', $7%[4]s
    ON CONFLICT (scope, method, key) DO UPDATE
    SET fingerprint = excluded.fingerprint, status = 'done', response = excluded.response,
        error_name = excluded.error_name, error_message = excluded.error_message, steps = '{}',
        fence = excluded.fence / (%[5]s AND t.fence = $9)::int,
        created_at = excluded.created_at, expires_at = excluded.expires_at,
        locked_until = NULL, intention = excluded.intention`

// claimExternal is the ClaimExternal statement over table (%[1]s), the
// time (%[2]s) and the condition of a row that may start a new intention
// (%[3]s).
const claimExternal = `INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, created_at, expires_at, locked_until, intention)
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
RETURNING fence, steps, intention, t.fence > 1 AS taken_over`

// finishExternal is the FinishExternal statement over table (%[1]s) and
// the key (%[2]s).
const finishExternal = `UPDATE %[1]s SET status = 'done', response = $4, error_name = $5, error_message = $6, locked_until = NULL
WHERE %[2]s AND fence = $7 AND intention IS NOT DISTINCT FROM $8::uuid AND status = 'in_progress'`

// releaseLock is the Release statement over table (%[1]s), the time
// (%[2]s) and the key (%[3]s).
const releaseLock = `UPDATE %[1]s SET locked_until = %[2]s
WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $6::uuid AND status = 'in_progress'`

// extendLock is the Extend statement over table (%[1]s), the time (%[2]s)
// and the key (%[3]s).
const extendLock = `UPDATE %[1]s SET locked_until = %[2]s + $6::bigint * interval '1 microsecond',
    expires_at = greatest(expires_at, %[2]s + $6::bigint * interval '1 microsecond')
WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $7::uuid AND status = 'in_progress'`

// recordStep is the Step and StepLegacy statement over table (%[1]s), the
// key (%[2]s) and the step's value (%[3]s).
const recordStep = `UPDATE %[1]s SET steps = jsonb_set(steps, ARRAY[$5::text], %[3]s)
WHERE %[2]s AND fence = $4 AND intention IS NOT DISTINCT FROM $7::uuid AND status = 'in_progress'`

// mismatchUpdate is the mismatch record over table (%[1]s), the time
// (%[2]s) and the key (%[3]s), with %[4]s after its SET: the row the
// refusal read, unless another statement holds it (SKIP LOCKED), on the
// key's shard (the outer scope names it to Citus).
const mismatchUpdate = `UPDATE %[1]s AS t SET mismatch_at = %[2]s, mismatch_fingerprint = $7%[4]s
WHERE t.scope = $2 AND (t.scope, t.method, t.key) = (SELECT scope, method, key FROM %[1]s
    WHERE %[3]s AND fence = $5 AND intention IS NOT DISTINCT FROM $6::uuid FOR UPDATE SKIP LOCKED)`

// sweepDelete is the sweep over table (%[1]s, the ledger or one of its
// shards), the time (%[2]s) and the batch's size (%[3]s): a parameter, or
// literals where the statement goes without parameters (ShardSweep).
const sweepDelete = `DELETE FROM %[1]s WHERE (scope, method, key) IN (
    SELECT scope, method, key FROM %[1]s WHERE expires_at <= %[2]s AND (locked_until IS NULL OR locked_until <= %[2]s)
    ORDER BY expires_at LIMIT %[3]s FOR UPDATE SKIP LOCKED)`

// ShardSweep is the ledger's sweep (Statements.Sweep) on one shard's table
// (shard, as Citus names it), its parameters written in: the time as SQL
// (now(), or the store clock's instant as a timestamptz literal) and the
// batch's size.
func ShardSweep(shard, now string, batch int) string {
	return fmt.Sprintf(sweepDelete, shard, now, strconv.Itoa(batch))
}

// atDatabaseClock rewrites a statement written with the time as $1 for the
// database's clock: now() in place of $1, and the other parameters one
// lower (the store leaves the time out of their arguments).
func atDatabaseClock(stmt string) string {
	stmt = strings.ReplaceAll(stmt, timeParam, "now()")
	return renumber(stmt, func(n int) int { return n - 1 })
}

// withoutParam renumbers the parameters of stmt, which does not use $n,
// after n one lower.
func withoutParam(stmt string, n int) string {
	return renumber(stmt, func(k int) int {
		if k > n {
			return k - 1
		}
		return k
	})
}

// renumber replaces each parameter $k of stmt (a dollar sign and the
// digits after it) with $to(k). (Not a regexp: compiling one at init costs
// every process that links this package, the generator included.)
func renumber(stmt string, to func(int) int) string {
	var b strings.Builder
	for i := 0; i < len(stmt); {
		j := i + 1
		for stmt[i] == '$' && j < len(stmt) && stmt[j] >= '0' && stmt[j] <= '9' {
			j++
		}
		if j == i+1 {
			b.WriteByte(stmt[i])
			i++
			continue
		}
		k, _ := strconv.Atoi(stmt[i+1 : j])
		b.WriteString("$" + strconv.Itoa(to(k)))
		i = j
	}
	return b.String()
}

// KeyLockSQL takes the advisory lock $1 (the key's lock id, a hash of
// scope, method and key) for the rest of the transaction: atomic mode's
// bound on a twin's wait. A free lock is taken at once (tried), and nothing
// else runs: the statement answers no row. Otherwise it waits for the lock
// for at most $2 (the claim wait as a lock_timeout) and answers one row:
// the lock_timeout in force is read (saved), the claim wait set
// (claim_wait), the lock taken (locked) and the saved setting put back once
// the lock is held; each step reads the one before, and MATERIALIZED keeps
// each evaluated once, in that order. A wait that runs out fails the
// statement (55P03) and the transaction with it, which undoes the claim
// wait's setting too.
const KeyLockSQL = `WITH tried AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1::bigint) AS free),
saved AS MATERIALIZED (SELECT current_setting('lock_timeout') AS lock_timeout FROM tried WHERE NOT free),
claim_wait AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true) FROM saved),
locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::bigint) FROM claim_wait)
SELECT set_config('lock_timeout', saved.lock_timeout, true) FROM saved, locked`

// The standby's statements (the runtime's replication.go).

// syncRepColumn is true when the session's commits wait for a synchronous
// standby: a column of the read statement (readColumns), so that a replay
// learns it with the row. A server that does not know the settings (a
// PostgreSQL-compatible one) reads them as NULL: false.
const syncRepColumn = `coalesce(current_setting('synchronous_standby_names', true) <> ''
    AND current_setting('synchronous_commit', true) IN ('on', 'remote_write', 'remote_apply'), false)`

// SyncRepSQL answers one row when the session's commits wait for a
// synchronous standby, none otherwise (the command tag says which). It goes
// out with the inline lookup, in the same round trip.
const SyncRepSQL = `SELECT 1 WHERE ` + syncRepColumn

// ConfirmReplicationSQL writes a record to the WAL in the transaction: an
// empty transactional logical decoding message (prefix "idem.confirm";
// logical decoding consumers see it and may skip it). PostgreSQL waits for
// the standby only on the commit of a transaction that wrote WAL (a
// transaction id alone is not enough), and this is the smallest such write
// any role may make, on any wal_level, touching no table.
const ConfirmReplicationSQL = `SELECT pg_logical_emit_message(true, 'idem.confirm', '')`

// ConfirmIfSyncRepSQL is ConfirmReplicationSQL when SyncRepSQL would answer
// a row, and writes nothing otherwise: for a replay that has not asked.
const ConfirmIfSyncRepSQL = `SELECT CASE WHEN current_setting('synchronous_standby_names', true) <> ''
    AND current_setting('synchronous_commit', true) IN ('on', 'remote_write', 'remote_apply')
  THEN pg_logical_emit_message(true, 'idem.confirm', '') END`
