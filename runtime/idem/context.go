package idem

import (
	"context"
	"sync/atomic"
	"time"
)

type ctxKey int

const (
	keyCtx ctxKey = iota
	scopeCtx
	outcomeCtx
	stepsCtx
	fallbackKeyCtx
)

// ContextWithKey returns a context carrying the idempotency key for the next call.
// The key is validated when the call is made, not here.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx, key)
}

// KeyFrom returns the idempotency key carried by ctx: the one set by
// ContextWithKey (or by a wrapper's -key, ContextWithDefaultKey), else the
// fallback key (ContextWithFallbackKey).
func KeyFrom(ctx context.Context) (string, bool) {
	k, _, ok := keyFrom(ctx)
	return k, ok
}

// keyFrom is KeyFrom, and whether the key is the fallback.
func keyFrom(ctx context.Context) (key string, fallback, ok bool) {
	if k, ok := ctx.Value(keyCtx).(string); ok {
		return k, false, true
	}
	k, ok := ctx.Value(fallbackKeyCtx).(string)
	return k, ok, ok
}

// ContextWithFallbackKey returns a context carrying key as the idempotency
// key of a call that gets no other: a key set by ContextWithKey, or the
// request's own key field, which a wrapper generated with -key puts in the
// context (ContextWithDefaultKey), both win over it. Consumers
// (runtime/idemnats, runtime/idemriver) set the message's or the job's ID
// this way, so a wrapper with -key is keyed by its field and one without
// by the delivery. The key is validated when the call is made, not here.
func ContextWithFallbackKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, fallbackKeyCtx, key)
}

// ContextWithScope returns a context carrying the scope (tenant, account, API client)
// the key belongs to. The same key in two scopes names two different requests.
func ContextWithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeCtx, scope)
}

// ScopeFrom returns the scope carried by ctx, or "" when there is none.
func ScopeFrom(ctx context.Context) string {
	s, _ := ctx.Value(scopeCtx).(string)
	return s
}

// Outcome records what an idempotent call did. Callers that need to know (the
// HTTP middleware sets the Idempotent-Replayed header from it) attach one with
// ContextWithOutcome before the call. It is safe for concurrent use.
type Outcome struct {
	replayed  atomic.Bool
	retention atomic.Int64 // time.Duration
	key       atomic.Pointer[outcomeKey]
}

// outcomeKey is the key a call read from its context.
type outcomeKey struct {
	key      string
	fallback bool
}

// Key returns the idempotency key the last call made with the context read
// from it, valid or not ("" before any call, and for a call whose context
// carried none), and whether that key was the context's fallback
// (ContextWithFallbackKey) rather than one set by ContextWithKey or taken
// from the request by a wrapper generated with -key. Consumers report with
// it where a message's key came from.
func (o *Outcome) Key() (key string, fallback bool) {
	if k := o.key.Load(); k != nil {
		return k.key, k.fallback
	}
	return "", false
}

// Replayed reports whether the last call made with the context returned a
// stored response instead of running the method.
func (o *Outcome) Replayed() bool { return o.replayed.Load() }

// Retention returns the retention window of the method the last call made
// with the context called (0 before any call): its key is remembered for
// that long after the first request made with it, and a request sent later
// under the key is treated as new. The HTTP middleware advertises it.
func (o *Outcome) Retention() time.Duration { return time.Duration(o.retention.Load()) }

// ContextWithOutcome returns a context that records the outcome of idempotent calls
// made with it into the returned *Outcome.
func ContextWithOutcome(ctx context.Context) (context.Context, *Outcome) {
	o := &Outcome{}
	return context.WithValue(ctx, outcomeCtx, o), o
}

// startOutcome resets ctx's Outcome, if any, for a call of a method whose
// retention window is retention.
func startOutcome(ctx context.Context, retention time.Duration) {
	if o, ok := ctx.Value(outcomeCtx).(*Outcome); ok {
		o.replayed.Store(false)
		o.retention.Store(int64(retention))
	}
}

// noteKey records in ctx's Outcome, if any, the key a call read from ctx.
func noteKey(ctx context.Context, key string, fallback bool) {
	if o, ok := ctx.Value(outcomeCtx).(*Outcome); ok {
		o.key.Store(&outcomeKey{key: key, fallback: fallback})
	}
}

func setReplayed(ctx context.Context, replayed bool) {
	if o, ok := ctx.Value(outcomeCtx).(*Outcome); ok {
		o.replayed.Store(replayed)
	}
}

// ContextWithDefaultKey returns ctx carrying key unless ctx already carries
// an idempotency key set by ContextWithKey, which then wins. A fallback key
// (ContextWithFallbackKey) does not: key replaces it. Wrappers generated
// with -key call it with the request's key field, so a consumer that sets
// no key, or only a fallback (the message's or the job's ID), gets the
// request's own.
func ContextWithDefaultKey(ctx context.Context, key string) context.Context {
	if _, ok := ctx.Value(keyCtx).(string); ok {
		return ctx
	}
	return ContextWithKey(ctx, key)
}

// UUIDKey renders a UUID (any [16]byte-based type, such as google/uuid's
// uuid.UUID) as a key in its canonical form, 8-4-4-4-12 lowercase hex. The
// zero UUID, which a request that never set its ID carries, renders as ""
// so the call fails with idem.ErrInvalidKey instead of every such request
// sharing one key.
func UUIDKey[U ~[16]byte](u U) string {
	if u == (U{}) {
		return ""
	}
	const hexDigits = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return string(b)
}
