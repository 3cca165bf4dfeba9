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

// What an inline-mode method is to the runtime (InlineMethod), the key it
// writes (InlineKey), and inline mode's SQL text (ledger.InlineStatements).

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

// inlineQueries are an inline method's table and the runtime's statements
// on it.
type inlineQueries struct {
	schema ledger.Inline
	ledger.InlineStatements
}

func (m *InlineMethod[R]) queries() (*inlineQueries, error) {
	m.once.Do(func() {
		schema, err := ledger.NewInline(m.Table)
		if err != nil {
			m.err = fmt.Errorf("idem: %s: inline table: %w", m.Name, err)
			return
		}
		m.q = inlineQueries{schema: schema, InlineStatements: schema.Statements()}
	})
	return &m.q, m.err
}

// freeStmt returns the statement that frees c's key if its window has
// ended, and its arguments, by the store's clock.
func (q *inlineQueries) freeStmt(s *Store, c call, retention time.Duration) (string, []any) {
	if now := s.now(); now != nil {
		return q.FreeAt, []any{now, c.scope, c.key, micros(retention)}
	}
	return q.Free, []any{c.scope, c.key, micros(retention)}
}

func (m *InlineMethod[R]) retention(s *Store) time.Duration {
	if m.Retention > 0 {
		return m.Retention
	}
	return s.cfg.retention
}

func keyNotWritten(c call, q *inlineQueries) error {
	return fmt.Errorf("idem: %s: %w: no row of %s holds key %q with the request's fingerprint; write idem.InlineKeyFrom(ctx) into its %s, %s and %s columns",
		c.method, ErrKeyNotWritten, q.schema.Table, c.key, ledger.InlineScopeColumn, ledger.InlineKeyColumn, ledger.InlineFingerprintColumn)
}

// runInlineBody runs an inline-mode body on tx with the call's key in its
// context (InlineKeyFrom), then the Executed hook. It returns that key and
// the event the Claimed hook reports once the claim is known to hold.
func runInlineBody[R, TTx any](ctx context.Context, s *Store, c call, tx TTx, body func(context.Context, TTx) (R, error)) (InlineKey, Event, R, error) {
	k := InlineKey{Scope: c.scope, Key: c.key, Fingerprint: c.fp}
	ev := c.event()
	start := time.Now()
	out, berr := body(context.WithValue(ctx, inlineKeyCtx, k), tx)
	ev.Duration, ev.Err = time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)
	return k, ev, out, berr
}
