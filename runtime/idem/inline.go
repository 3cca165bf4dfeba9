package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Inline mode keeps the key in the business row itself: the method's own
// INSERT writes the scope, key and fingerprint (InlineKeyFrom) into columns
// of its table, a partial unique index on (scope, key) makes that INSERT the
// claim, and a lookup method answers retries from the row. There is no second
// table and no second write: the claimed path costs the work's own round trips.

// ErrKeyNotWritten is returned when an inline-mode body returned without
// writing its key: no row of the method's table holds the key with the
// request's fingerprint. The transaction is rolled back, so a body that
// forgets the key columns can never run without idempotency.
var ErrKeyNotWritten = errors.New("idem: inline method did not write its idempotency key")

// InlineKey is what an inline-mode method writes into its row, and what its
// lookup finds the row by.
type InlineKey struct {
	Scope       string // write into idempotency_scope (never NULL: "" when there is no scope)
	Key         string // write into idempotency_key
	Fingerprint []byte // write into idempotency_fingerprint
}

const inlineKeyCtx ctxKey = 100

// InlineKeyFrom returns the key an inline-mode method must write into its
// row. The generated wrapper puts it in the context it hands the method; ok is
// false when the method was called some other way.
func InlineKeyFrom(ctx context.Context) (InlineKey, bool) {
	k, ok := ctx.Value(inlineKeyCtx).(InlineKey)
	return k, ok
}

// ContextWithInlineKey returns a context carrying k as the key an inline-mode method
// must write. The generated wrappers set it; call it yourself only to run such
// a method outside its wrapper (a test, a backfill).
func ContextWithInlineKey(ctx context.Context, k InlineKey) context.Context {
	return context.WithValue(ctx, inlineKeyCtx, k)
}

// InlineLookup reads the row stored under k.Scope and k.Key and returns the
// response it represents and the fingerprint written with it. It returns an
// error wrapping pgx.ErrNoRows when there is no such row.
type InlineLookup[R any] func(ctx context.Context, tx pgx.Tx, k InlineKey) (R, []byte, error)

// InlineMethod describes one inline-mode method. Generated code declares one
// per annotated method; it is read-only after creation.
type InlineMethod[R any] struct {
	// Name identifies the method in errors, logs and hooks.
	Name string
	// Table is the business table whose rows carry the key, e.g. "orders"
	// or "shop.orders". It must have the inline columns and index
	// (ledger.Inline); one inline method per table.
	Table string
	// Retention is how long a key is remembered; 0 uses the store's
	// default. A key sent later is treated as new: its old row keeps its
	// data and loses its key.
	Retention time.Duration

	once sync.Once
	q    inlineQueries
	err  error
}

type inlineQueries struct {
	schema ledger.Inline
	check  string // $1 scope, $2 key, $3 fingerprint
	free   string // $1 now, $2 scope, $3 key, $4 retention µs
	sweep  string // $1 now, $2 retention µs, $3 batch
}

func (m *InlineMethod[R]) queries() (*inlineQueries, error) {
	m.once.Do(func() {
		schema, err := ledger.NewInline(m.Table)
		if err != nil {
			m.err = fmt.Errorf("idem: %s: inline table: %w", m.Name, err)
			return
		}
		m.q = newInlineQueries(schema)
	})
	return &m.q, m.err
}

func newInlineQueries(s ledger.Inline) inlineQueries {
	const now = "coalesce($1::timestamptz, now())"
	t := s.Table.Quoted()
	key, scope := ledger.Quote(ledger.InlineKeyColumn), ledger.Quote(ledger.InlineScopeColumn)
	fp, at := ledger.Quote(ledger.InlineFingerprintColumn), ledger.Quote(ledger.InlineClaimedAtColumn)
	clear := fmt.Sprintf("%s = NULL, %s = NULL, %s = NULL, %s = NULL", key, scope, fp, at)
	return inlineQueries{
		schema: s,
		// check: sent with COMMIT. The body must have written exactly one
		// row with its key and fingerprint; any other count divides by
		// zero, which aborts the transaction, so the COMMIT rolls back.
		check: fmt.Sprintf(`SELECT 1 / (count(*) = 1)::int FROM %s WHERE %s = $1 AND %s = $2 AND %s = $3`, t, scope, key, fp),
		// free: after a refused claim, a key whose window has ended is
		// taken off its old row (the row stays) so the request runs as new.
		free: fmt.Sprintf(`UPDATE %[1]s SET %[2]s
WHERE %[3]s = $2 AND %[4]s = $3 AND %[5]s + $4::bigint * interval '1 microsecond' <= %[6]s`, t, clear, scope, key, at, now),
		// sweep: one batch of rows whose key has expired loses the key;
		// rows a transaction holds are skipped, so cleanup never waits.
		sweep: fmt.Sprintf(`WITH batch AS MATERIALIZED (
    SELECT %[3]s AS scope, %[4]s AS key FROM %[1]s
    WHERE %[4]s IS NOT NULL AND %[5]s + $2::bigint * interval '1 microsecond' <= %[6]s
    LIMIT $3 FOR UPDATE SKIP LOCKED)
UPDATE %[1]s AS t SET %[2]s FROM batch
WHERE t.%[4]s IS NOT NULL AND t.%[3]s = batch.scope AND t.%[4]s = batch.key`, t, clear, scope, key, at, now),
	}
}

func (m *InlineMethod[R]) retention(s *Store) time.Duration {
	if m.Retention > 0 {
		return m.Retention
	}
	return s.cfg.retention
}

// errKeyFreed marks a refused claim whose key had expired and was taken off
// its old row: the next attempt claims it anew.
var errKeyFreed = errors.New("idem: expired key freed")

// Inline runs body at most once per (scope, key) in m's table. body runs in
// a transaction and must write InlineKeyFrom(ctx) into the row it inserts:
// that INSERT is the claim.
//
//   - Claimed: the row is written, and a check that it holds the key and the
//     fingerprint travels with COMMIT. A body that returns without having
//     written its key gets ErrKeyNotWritten and everything rolls back.
//   - A concurrent twin's INSERT blocks on the unique index until the first
//     commits, then fails with a unique violation on that index (matched by
//     name; any other violation is the body's own error). The transaction is
//     rolled back and lookup reads the row outside any transaction: the same
//     fingerprint replays the row's response, another is a *MismatchError.
//     A finished key is answered in two round trips.
//   - A key whose retention window has ended is taken off its old row (the
//     row stays) and the request runs as new.
//
// A body error rolls back and is returned; nothing is stored, so a retry runs
// again. Inline mode stores no errors: a final error cannot be replayed from
// the business table. Serialization failures, deadlocks and unknown COMMIT
// outcomes retry the whole transaction, as in Atomic. If the database cannot
// be reached the body does not run (errors.Is(err, ErrStore)).
//
// TTx picks the driver, as in Atomic: a pgx.Tx on a store made by NewStore,
// where the ledger's statements travel with the body's own and the lost
// claim is seen on the body's INSERT; or a *sql.Tx on a store made by
// NewSQLStore. database/sql gives no way to watch the body's statements, so
// there the lost claim is seen in the error body returns: return the
// INSERT's error (wrapped is fine). A body that swallows it fails at the
// key check with the transaction's abort instead, and is not replayed. On
// database/sql the lookup runs in a transaction of its own.
func Inline[R, TTx any](ctx context.Context, s *Store, m *InlineMethod[R], fingerprint []byte,
	lookup func(ctx context.Context, tx TTx, k InlineKey) (R, []byte, error), body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	if _, err := driverFor[TTx](s, "Inline"); err != nil {
		return zero, err
	}
	q, err := m.queries()
	if err != nil {
		return zero, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return zero, err
	}
	startOutcome(ctx, m.retention(s))
	return retryAttempts(ctx, s, c, func() (R, error) { return inlineAttempt(ctx, s, m, q, c, lookup, body) })
}

// inlinePgxAttempt is one attempt of Inline on the pgx driver.
func inlinePgxAttempt[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), body func(context.Context, pgx.Tx) (R, error)) (R, error) {
	var zero R
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return zero, storeErr(c.method, "acquire connection", err)
	}
	defer conn.Release()
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' { // error, refused claim, or a panic on its way up
			s.rollback(ctx, conn)
		}
	}()

	pc := conn.Conn()
	// BEGIN travels with the body's first statement.
	tx := newInlineTx(pc, pc, q.schema, func(ctx context.Context) (pgx.Tx, error) {
		return pc.BeginTx(ctx, pgx.TxOptions{BeginQuery: "SELECT 1"})
	}, "BEGIN")
	k := InlineKey{Scope: c.scope, Key: c.key, Fingerprint: c.fp}
	bctx := context.WithValue(ctx, inlineKeyCtx, k)
	ev := c.event()
	start := time.Now()
	out, berr := body(bctx, tx)
	ev.Duration, ev.Err = time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)
	if tx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	if tx.lostClaim() {
		// Another row holds the key. End the aborted transaction and free
		// the key if it has expired, both in the lookup's round trip; the
		// lookup then reads outside any transaction.
		var prefix []pendingStmt
		if tx.opened() {
			prefix = append(prefix, pendingStmt{sql: "ROLLBACK"})
		}
		syncRep := false
		prefix = append(prefix, pendingStmt{sql: syncRepSQL, done: func(tag pgconn.CommandTag) { syncRep = tag.RowsAffected() == 1 }})
		confirm := func(ctx context.Context) error {
			if !syncRep {
				return nil
			}
			return s.confirmReplication(ctx, pc, pc.PgConn(), c, "", false)
		}
		return inlineAnswer(ctx, s, m, q, c, tx, prefix, lookup, k, confirm)
	}
	if berr != nil {
		return zero, berr
	}
	if !tx.opened() {
		return zero, fmt.Errorf("idem: %s: %w: the method sent no statement; write idem.InlineKeyFrom(ctx) into %s's idempotency columns", c.method, ErrKeyNotWritten, q.schema.Table)
	}

	// The key check and COMMIT travel in one round trip.
	t := &pgxAttempt{conn: conn}
	if err := commit(ctx, s, c, t, q.check, []any{c.scope, c.key, c.fp}, "check key and commit", keyNotWritten(c, q)); err != nil {
		return zero, err
	}
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}

func keyNotWritten(c call, q *inlineQueries) error {
	return fmt.Errorf("idem: %s: %w: no row of %s holds key %q with the request's fingerprint; write idem.InlineKeyFrom(ctx) into its %s, %s and %s columns",
		c.method, ErrKeyNotWritten, q.schema.Table, c.key, ledger.InlineScopeColumn, ledger.InlineKeyColumn, ledger.InlineFingerprintColumn)
}

// inlineAnswer answers a refused claim from the row that holds the key: it
// sends prefix and the statement freeing an expired key ahead of the
// lookup's first statement, then compares fingerprints.
//
// confirm runs before the row is replayed: it makes sure the row is on a
// synchronous standby (see replication.go).
func inlineAnswer[R any](ctx context.Context, s *Store, m *InlineMethod[R], q *inlineQueries, c call, tx *inlineTx, prefix []pendingStmt, lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), k InlineKey, confirm func(context.Context) error) (R, error) {
	var zero R
	freed := false
	prefix = append(prefix, pendingStmt{
		sql:  q.free,
		args: []any{s.now(), c.scope, c.key, micros(m.retention(s))},
		done: func(tag pgconn.CommandTag) { freed = tag.RowsAffected() > 0 },
	})
	tx.reset(prefix)
	lctx := context.WithValue(ctx, inlineKeyCtx, k)
	out, stored, lerr := lookup(lctx, tx, k)
	if ferr := tx.flush(ctx); ferr != nil && lerr == nil {
		lerr = ferr
	}
	if tx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: lookup: %w", c.method, errBodyEndedTx)
	}
	return inlineSettle(ctx, s, c, out, stored, lerr, freed, confirm)
}

// inlineSettle turns the lookup's answer after a refused claim into the
// caller's: freed reports that the key had expired and was taken off its
// old row (claim it anew); then the row's response, or a mismatch. confirm
// runs before the row is replayed (see replication.go).
func inlineSettle[R any](ctx context.Context, s *Store, c call, out R, stored []byte, lerr error, freed bool, confirm func(context.Context) error) (R, error) {
	var zero R
	if freed {
		s.hook(ctx, s.cfg.hooks.TakenOver, c.event())
		return zero, fmt.Errorf("idem: %s: %w", c.method, errKeyFreed)
	}
	if errors.Is(lerr, pgx.ErrNoRows) {
		// The holder rolled back, or the key was swept, in between.
		return zero, fmt.Errorf("idem: %s: %w", c.method, errRowVanished)
	}
	if lerr != nil {
		return zero, storeErr(c.method, "look up the row holding the key", lerr)
	}
	if string(stored) != string(c.fp) {
		s.hook(ctx, s.cfg.hooks.Mismatch, c.event())
		s.cfg.logger.WarnContext(ctx, "idempotency key reused with a different request",
			"method", c.method, "scope", c.scope, "key", c.key,
			"stored", shortHex(stored), "got", shortHex(c.fp))
		return zero, &MismatchError{Method: c.method, Key: c.key, Stored: stored, Got: c.fp}
	}
	if err := confirm(ctx); err != nil {
		return zero, err
	}
	setReplayed(ctx, true)
	s.hook(ctx, s.cfg.hooks.Replayed, c.event())
	return out, nil
}

// InlineInTx is Inline inside the caller's transaction tx, under a savepoint
// that travels with the body's first statement. A refused claim rolls back to
// the savepoint and the lookup runs in tx, so tx stays usable; everything
// commits (or not) with tx. A concurrent twin waits for tx to end. The lookup
// sees the holder's row only if tx's snapshot allows it (READ COMMITTED, the
// default, does). Serialization failures are returned, not retried: only the
// caller can retry its transaction.
// tx is a pgx.Tx on a store made by NewStore, or a *sql.Tx on one made by
// NewSQLStore, as in Inline; on database/sql, body must return the error of
// the INSERT that claims.
func InlineInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *InlineMethod[R], fingerprint []byte,
	lookup func(ctx context.Context, tx TTx, k InlineKey) (R, []byte, error), body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	if _, err := driverFor[TTx](s, "InlineInTx"); err != nil {
		return zero, err
	}
	q, err := m.queries()
	if err != nil {
		return zero, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return zero, err
	}
	startOutcome(ctx, m.retention(s))
	return inlineInTx(ctx, s, tx, m, fingerprint, q, c, lookup, body)
}

// inlinePgxInTx is InlineInTx on the pgx driver. A key freed on the way is
// claimed once more through InlineInTx.
func inlinePgxInTx[R any](ctx context.Context, s *Store, tx pgx.Tx, m *InlineMethod[R], fingerprint []byte, q *inlineQueries, c call,
	lookup func(context.Context, pgx.Tx, InlineKey) (R, []byte, error), body func(context.Context, pgx.Tx) (R, error)) (R, error) {
	var zero R
	const sp = "idem_inline"
	itx := newInlineTx(tx.Conn(), tx, q.schema, func(context.Context) (pgx.Tx, error) { return tx, nil }, "SAVEPOINT "+sp)
	undo := func() error {
		if !itx.opened() {
			return nil
		}
		// One simple-protocol string: an aborted transaction refuses to
		// prepare anything but its own end. Bounded like every write made
		// after the caller's context may have ended.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
		defer cancel()
		_, err := tx.Exec(uctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp)
		return err
	}
	released := false
	defer func() { // error paths and panics
		if !released {
			_ = undo()
		}
	}()

	k := InlineKey{Scope: c.scope, Key: c.key, Fingerprint: c.fp}
	bctx := context.WithValue(ctx, inlineKeyCtx, k)
	ev := c.event()
	start := time.Now()
	out, berr := body(bctx, itx)
	ev.Duration, ev.Err = time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)
	if itx.bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	if itx.lostClaim() {
		released = true
		syncRep := false
		prefix := []pendingStmt{{sql: "ROLLBACK TO SAVEPOINT " + sp}, {sql: "RELEASE SAVEPOINT " + sp},
			{sql: syncRepSQL, done: func(tag pgconn.CommandTag) { syncRep = tag.RowsAffected() == 1 }}}
		confirm := func(ctx context.Context) error {
			if !syncRep {
				return nil
			}
			return s.confirmInTx(ctx, tx, c)
		}
		out, err := inlineAnswer(ctx, s, m, q, c, itx, prefix, lookup, k, confirm)
		if errors.Is(err, errKeyFreed) {
			// Claim the freed key once more, still inside tx.
			return InlineInTx(ctx, s, tx, m, fingerprint, lookup, body)
		}
		return out, err
	}
	if berr != nil {
		return zero, berr
	}
	if !itx.opened() {
		return zero, fmt.Errorf("idem: %s: %w: the method sent no statement; write idem.InlineKeyFrom(ctx) into %s's idempotency columns", c.method, ErrKeyNotWritten, q.schema.Table)
	}
	b := &pgx.Batch{}
	b.Queue(q.check, c.scope, c.key, c.fp)
	b.Queue("RELEASE SAVEPOINT " + sp)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if isDivisionByZero(err) {
		_ = br.Close()
		return zero, keyNotWritten(c, q)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return zero, storeErr(c.method, "check key", err)
	}
	released = true
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	return out, nil
}

// SweepInline takes expired keys off m's table in batches of batch rows
// (DefaultSweepBatch if batch <= 0): their key, scope, fingerprint and
// claimed-at columns become NULL, so the key is free again, and the rows
// themselves stay. Each batch is one short statement that skips rows a
// transaction holds, paced like Sweep (WithSweepShare). It stops when a
// batch comes back short or ctx ends, and returns how many rows it cleared.
func SweepInline[R any](ctx context.Context, s *Store, m *InlineMethod[R], batch int) (int64, error) {
	q, err := m.queries()
	if err != nil {
		return 0, err
	}
	return s.sweepBatches(ctx, batch, func(batch int) (int64, error) {
		tag, err := s.pool.Exec(ctx, q.sweep, s.now(), micros(m.retention(s)), batch)
		if err != nil {
			return 0, storeErr(m.Name, "clear expired keys", err)
		}
		return tag.RowsAffected(), nil
	}, Event{Method: m.Name})
}
