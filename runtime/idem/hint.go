package idem

import (
	"context"
	"sync"
	"sync/atomic"
)

// Whether an atomic call looks its key up before its body.
//
// A first attempt, nearly every call, can only meet a row of its key if
// the key was reused, so Atomic does not look the key up first: BEGIN
// (with the key's lock) travels with the body's first statement, and the
// record with COMMIT. AtomicInTx does the same in the caller's
// transaction, with SAVEPOINT and RELEASE. The record's plain INSERT is what finds a row the
// key already has: it is refused (the unique index), the body's work rolls
// back with the transaction, and the key is then looked up and answers as
// a lookup before the body would have (a replay, a mismatch, in progress).
// A call that may be a retry looks the key up first instead, which spares
// it running the body only to roll it back. Either way the answer is the
// same: the hint decides what a call costs, never what it answers.
//
// A call is taken for a possible retry when
//
//   - its context says so (ContextWithRetry; the adapters set it where the
//     transport tells a retry from a first attempt), or
//   - its method's recent calls in this store were mostly replays
//     (replayRates): a retry storm with no hint turns to lookups first
//     after a few calls, and back once first attempts prevail again, or
//   - it is not the call's first attempt (an attempt retried after a
//     serialization failure, an unknown COMMIT outcome, or a record
//     refused by an expired row, which only the lookup's fence lets the
//     record take over), or
//   - the store was made WithLookupFirst.

// retryCtx marks a context whose calls may be retries (ContextWithRetry).
type retryCtx struct{}

// ContextWithRetry returns ctx marked as carrying a call that may be a
// retry of an earlier one under the same key: an atomic call made with it
// looks its key up before its body runs, so that a key already done
// answers at once (one round trip) instead of running the body and rolling
// it back. Without the mark a call is taken for a first attempt unless its
// method's recent calls were mostly replays. The mark changes what a call
// costs, never what it answers: a mark on a first attempt costs it one
// lookup, a missing mark on a retry costs it a run of its body that is
// rolled back. The adapters set it when the transport says the request
// is a retry (gRPC's grpc-previous-rpc-attempts, a NATS redelivery, a
// River job's later attempt, the project's HTTP client transport's
// Idempotency-Previous-Attempts header). Other modes ignore it.
func ContextWithRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, retryCtx{}, true)
}

// RetryFrom reports whether ctx was marked by ContextWithRetry.
func RetryFrom(ctx context.Context) bool {
	v, _ := ctx.Value(retryCtx{}).(bool)
	return v
}

// WithLookupFirst makes every atomic call look its key up before its body,
// hinted or not: the protocol before first attempts skipped the lookup. A
// first attempt then costs one more round trip, and a retry never runs its
// body. For methods whose bodies are costly to run only to roll back, on
// a store where retries are common and unmarked.
func WithLookupFirst() Option { return func(c *config) { c.lookupFirst = true } }

// The adaptive rule (replayRates): each method's replay rate is an
// exponentially weighted average over its calls in this store, each call
// weighing replayRateWeight of it: 1 for a call whose key already had a row
// (the lookup answered, or the record was refused), 0 for a call that
// recorded the key. While the rate is at least lookupFirstRate, calls
// look up first. Both kinds of call keep measuring it (a lookup that
// finds no row counts 0), so the rule follows the traffic both ways: from
// a rate of 0, ten replays in a row turn it on; from 1, five first
// attempts in a row turn it off.
const (
	// replayRateOne is a rate of 1 in the fixed point the rates are kept in.
	replayRateOne = 1 << 16
	// replayRateShift weighs each call 1/32 (replayRateWeight) of the rate.
	replayRateShift = 5
	// lookupFirstRate: a quarter of the method's recent calls replays.
	// Looking up first costs every call one lookup, and skipping it costs
	// each replay a run of its body (at least the two round trips of the
	// body's transaction): a quarter is where they cost alike for a body
	// as costly as three lookups.
	lookupFirstRate = replayRateOne / 4
	// maxReplayRates bounds the methods a store keeps a rate for; a method
	// beyond it is taken for a first attempt unless its call is marked.
	maxReplayRates = 1024
)

// replayRates keeps each method's recent replay rate in this store. It is
// safe for concurrent use; the zero value is ready.
type replayRates struct {
	by sync.Map     // method name → *atomic.Int32
	n  atomic.Int32 // methods in by
}

// rate returns method's rate, made if it has none and there is room
// (nil otherwise).
func (r *replayRates) rate(method string) *atomic.Int32 {
	if v, ok := r.by.Load(method); ok {
		return v.(*atomic.Int32)
	}
	if r.n.Add(1) > maxReplayRates {
		r.n.Add(-1)
		return nil
	}
	v, loaded := r.by.LoadOrStore(method, new(atomic.Int32))
	if loaded {
		r.n.Add(-1)
	}
	return v.(*atomic.Int32)
}

// likely reports whether method's recent calls were mostly replays.
func (r *replayRates) likely(method string) bool {
	v, ok := r.by.Load(method)
	return ok && v.(*atomic.Int32).Load() >= lookupFirstRate
}

// observe records one call of method: replay, its key already had a row.
func (r *replayRates) observe(method string, replay bool) {
	v := r.rate(method)
	if v == nil {
		return
	}
	target := int32(0)
	if replay {
		target = replayRateOne
	}
	for {
		old := v.Load()
		next := old + (target-old)>>replayRateShift
		if replay && next == old {
			next = old + 1 // the shift rounds down: still move towards 1
		}
		if next == old || v.CompareAndSwap(old, next) {
			return
		}
	}
}

// lookupFirst reports whether an atomic call of c's method looks its key
// up before its body (see above): a marked context, a method whose recent
// calls were mostly replays, or a store made WithLookupFirst.
func (s *Store) lookupFirst(ctx context.Context, c call) bool {
	return s.cfg.lookupFirst || RetryFrom(ctx) || s.replays.likely(c.method)
}
