package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

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
