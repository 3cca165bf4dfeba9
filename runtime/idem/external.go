package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

type waitCtx struct{}

// WithWait makes external-mode calls made with ctx wait for an attempt in
// progress to finish, and return its result, instead of failing at once with
// *InProgressError. The wait is bounded by ctx and by the holder's lock: when
// the lock runs out the waiter takes the key over and runs the method itself.
//
// Waiting polls the ledger row with capped, jittered backoff (50ms doubling to
// 1s, never past the lock's expiry). Polling was chosen over LISTEN/NOTIFY:
// it needs no connection held per waiter, works through transaction-pooling
// proxies such as PgBouncer, and cannot miss a notification sent before the
// waiter started listening.
func WithWait(ctx context.Context) context.Context { return context.WithValue(ctx, waitCtx{}, true) }

func waits(ctx context.Context) bool { w, _ := ctx.Value(waitCtx{}).(bool); return w }

// execution is the state of an external-mode body, reachable from its
// context by Step, DownstreamKey and the heartbeat.
type execution struct {
	s         *Store
	c         call
	fence     int64
	intention pgtype.UUID // NULL on rows claimed before intentions were recorded

	mu    sync.Mutex
	steps map[string]json.RawMessage
}

// External runs body at most once per (scope, method, key) for work whose
// side effects leave the database (a card network, an email provider). The
// claim commits an in-progress row with a lock (m.LockTimeout) and a fresh
// fencing token before body runs; body runs outside any transaction; the
// response is stored only if the token is still ours.
//
// A twin arriving meanwhile gets *InProgressError with RetryAfter (or waits,
// see WithWait). If the attempt dies (crash, cancelled context, panic) the key
// stays in progress until the lock expires, then the next retry takes over
// with a new token and runs body again: use Step to record what is done and
// DownstreamKey to make third-party calls idempotent themselves. A non-final
// error with ctx still live releases the lock so a retry can run at once; a
// final error is stored and replayed. A finalise that lost its lock returns an
// error matching ErrLockLost and never overwrites the newer attempt's result.
// The response returned, first time and on replay, is the one decoded from
// the stored bytes (see Method.Encode).
func External[R any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, body func(ctx context.Context) (R, error)) (R, error) {
	var zero R
	if err := m.check(s, true); err != nil {
		return zero, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return zero, err
	}
	setReplayed(ctx, false)
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ex, out, err := claimExternal(ctx, s, m, c)
		if ex != nil {
			return runExternal(ctx, s, m, ex, body)
		}
		var ip *InProgressError
		switch {
		case errors.Is(err, errRowVanished) && attempt < s.cfg.maxAttempts:
			continue
		case errors.As(err, &ip) && waits(ctx):
			d := min(wait, ip.RetryAfter)
			d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
			wait = min(2*wait, time.Second)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return zero, fmt.Errorf("%w (stopped waiting: %w)", err, ctx.Err())
			case <-t.C:
			}
			continue
		}
		return out, err
	}
}

// claimExternal returns an execution if it claimed the key, otherwise the
// answer from the row that holds it.
func claimExternal[R any](ctx context.Context, s *Store, m *Method[R], c call) (*execution, R, error) {
	var zero R
	var fence int64
	var steps map[string]json.RawMessage
	var takenOver bool
	var intention pgtype.UUID
	err := s.pool.QueryRow(ctx, s.q.claimExternal, s.now(), c.scope, c.method, c.key, c.fp,
		micros(m.retention(s)), micros(m.lockTimeout(s)), newIntention()).Scan(&fence, &steps, &intention, &takenOver)
	if err == nil {
		ex := &execution{s: s, c: c, fence: fence, intention: intention, steps: steps}
		ev := c.event()
		ev.Fence = fence
		s.hook(ctx, s.cfg.hooks.Claimed, ev)
		if takenOver {
			s.cfg.logger.WarnContext(ctx, "idempotency key taken over after its lock expired",
				"method", c.method, "scope", c.scope, "key", c.key, "fence", fence, "recorded_steps", len(steps))
			s.hook(ctx, s.cfg.hooks.TakenOver, ev)
		}
		return ex, zero, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, zero, storeErr(c.method, "claim", err)
	}
	r, found, err := s.readRow(ctx, s.pool, c)
	if err != nil {
		return nil, zero, err
	}
	if !found || r.expired {
		return nil, zero, errRowVanished
	}
	out, err := settle(ctx, s, m, c, r)
	return nil, out, err
}

func runExternal[R any](ctx context.Context, s *Store, m *Method[R], ex *execution, body func(context.Context) (R, error)) (R, error) {
	var zero R
	c := ex.c
	bctx, cancel := context.WithCancelCause(context.WithValue(ctx, stepsCtx, ex))
	defer cancel(nil)
	if s.cfg.heartbeat > 0 {
		stop := ex.heartbeat(bctx, m.lockTimeout(s), cancel)
		defer stop()
	}

	start := time.Now()
	out, berr := body(bctx)
	ev := c.event()
	ev.Fence, ev.Duration, ev.Err = ex.fence, time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)

	// Finalise even if the caller has gone: the side effect happened.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer fcancel()
	var resp []byte
	var errName, errMsg *string
	if berr != nil {
		name, final := finalError(m, berr)
		if !final {
			if ctx.Err() != nil || errors.Is(context.Cause(bctx), ErrLockLost) {
				// Abandoned mid-work: how far it got is unknown, so the key
				// stays locked until the lock expires.
				return zero, berr
			}
			if _, err := s.pool.Exec(fctx, s.q.release, s.now(), c.scope, c.method, c.key, ex.fence, ex.intention); err != nil {
				s.cfg.logger.ErrorContext(ctx, "could not release idempotency claim; it expires with its lock",
					"method", c.method, "key", c.key, "err", err)
			}
			return zero, berr
		}
		msg := berr.Error()
		errName, errMsg = &name, &msg
	} else {
		var err error
		if resp, out, err = stored(m, out); err != nil {
			return zero, fmt.Errorf("idem: %s: %w", c.method, err)
		}
	}
	tag, err := s.pool.Exec(fctx, s.q.finishExternal, c.scope, c.method, c.key, resp, errName, errMsg, ex.fence, ex.intention)
	if err != nil {
		return zero, storeErr(c.method, "store response", err)
	}
	if tag.RowsAffected() == 0 {
		s.cfg.logger.ErrorContext(ctx, "idempotent attempt finished after its claim was taken over; its result is discarded",
			"method", c.method, "scope", c.scope, "key", c.key, "fence", ex.fence)
		s.hook(ctx, s.cfg.hooks.LockLost, ev)
		return zero, fmt.Errorf("idem: %s: key %q: %w", c.method, c.key, ErrLockLost)
	}
	return out, berr
}

// heartbeat extends the lock every third of the lock timeout while the body
// runs. If the lock turns out lost, the body's context is cancelled with
// ErrLockLost as its cause.
func (ex *execution) heartbeat(ctx context.Context, lock time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(ex.s.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			c := ex.c
			tag, err := ex.s.pool.Exec(ctx, ex.s.q.extend, ex.s.now(), c.scope, c.method, c.key, ex.fence, micros(lock), ex.intention)
			if err == nil && tag.RowsAffected() == 0 {
				cancel(ErrLockLost)
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Step runs fn as a named recovery point of the external-mode method whose
// context ctx is. The first time, fn runs and its result is recorded on the
// ledger row (only while this attempt still holds the key: otherwise the
// result is ErrLockLost and the caller must stop). After a takeover, a step
// already recorded returns its recorded result without running fn again, so
// "create ride → charge card → send receipt" charges once. Results are stored
// with encoding/json. Outside an idempotent call, Step simply runs fn.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	ex, ok := ctx.Value(stepsCtx).(*execution)
	if !ok {
		return fn(ctx)
	}
	ex.mu.Lock()
	raw, done := ex.steps[name]
	ex.mu.Unlock()
	if done {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, fmt.Errorf("idem: step %q: decode recorded result: %w", name, err)
		}
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("idem: step %q: encode result: %w", name, err)
	}
	c := ex.c
	tag, err := ex.s.pool.Exec(context.WithoutCancel(ctx), ex.s.q.step, c.scope, c.method, c.key, ex.fence, name, string(b), ex.intention)
	if err != nil {
		return zero, storeErr(c.method, "record step "+name, err)
	}
	if tag.RowsAffected() == 0 {
		return zero, fmt.Errorf("idem: %s: step %q: %w", c.method, name, ErrLockLost)
	}
	ex.mu.Lock()
	if ex.steps == nil {
		ex.steps = map[string]json.RawMessage{}
	}
	ex.steps[name] = b
	ex.mu.Unlock()
	return v, nil
}

// DownstreamKey derives an idempotency key for a call to a third party that
// accepts its own keys (a payment provider, say). Inside an external-mode
// call it depends on the scope, method and key of the call, on the intention
// the ledger row records, and on purpose: the re-run after a takeover sends
// the same key downstream and the third party deduplicates it, while the same
// key reused after its retention window (a new request) sends a new one, so
// the third party does not answer it with the old request's result. Outside
// an idempotent call it depends on the context's scope and key and on
// purpose only. The result is 32 hex characters prefixed with "idem-".
func DownstreamKey(ctx context.Context, purpose string) string {
	c := call{scope: ScopeFrom(ctx)}
	parts := []string{"idem-downstream/v1"}
	if ex, ok := ctx.Value(stepsCtx).(*execution); ok {
		c = ex.c
		if ex.intention.Valid { // rows claimed before intentions were recorded keep v1
			parts = []string{"idem-downstream/v2", hex.EncodeToString(ex.intention.Bytes[:])}
		}
	} else {
		c.key, _ = KeyFrom(ctx)
	}
	h := sha256.New()
	for _, part := range append(parts, c.scope, c.method, c.key, purpose) {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "idem-" + hex.EncodeToString(h.Sum(nil)[:16])
}
