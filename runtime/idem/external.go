package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

type waitCtx struct{}

// ContextWithWait makes external-mode calls made with ctx wait for an attempt in
// progress to finish, and return its result, instead of failing at once with
// *InProgressError. The wait is bounded by ctx and by the holder's lock: when
// the lock runs out the waiter takes the key over and runs the method itself.
//
// Waiting polls the ledger row with capped, jittered backoff (50ms doubling to
// 1s, never past the lock's expiry). Polling was chosen over LISTEN/NOTIFY:
// it needs no connection held per waiter, works through transaction-pooling
// proxies such as PgBouncer, and cannot miss a notification sent before the
// waiter started listening.
func ContextWithWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitCtx{}, true)
}

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
	unrec error // a step ran but its result could not be recorded
}

// External runs body at most once per (scope, method, key) for work whose
// side effects leave the database (a card network, an email provider). The
// claim commits an in-progress row with a lock (m.LockTimeout) and a fresh
// fencing token before body runs; body runs outside any transaction; the
// response is stored only if the token is still ours.
//
// A twin arriving meanwhile gets *InProgressError with RetryAfter (or waits,
// see ContextWithWait). If the attempt dies (crash, cancelled context, panic) the key
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
	startOutcome(ctx, m.retention(s))
	wait := 50 * time.Millisecond
	var waited error // the in-progress answer being waited out
	for attempt := 1; ; attempt++ {
		ex, out, err := claimExternal(ctx, s, m, c)
		if ex != nil {
			return runExternal(ctx, s, m, ex, body)
		}
		var ip *InProgressError
		switch {
		case errors.Is(err, errRowVanished) && attempt < s.cfg.maxAttempts:
			continue
		case waited != nil && ctx.Err() != nil && errors.Is(err, ErrStore):
			// The caller's deadline ended the wait during a poll.
			return zero, fmt.Errorf("%w (stopped waiting: %w)", waited, ctx.Err())
		case errors.As(err, &ip) && waits(ctx):
			waited = err
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
	if err := ctx.Err(); err != nil {
		return nil, zero, storeErr(c.method, "claim", err)
	}
	// The claim commits detached from ctx: a caller going away must not
	// cancel it while it waits for a synchronous standby (replication.go).
	cctx, cancel := s.commitContext(ctx)
	defer cancel()
	err := s.committing(ctx, cctx, func(q stmts) error {
		return q.QueryRow(cctx, s.q.ClaimExternal, s.at(c.scope, c.method, c.key, c.fp,
			micros(m.retention(s)), micros(m.lockTimeout(s)), newIntention())...).Scan(&fence, &steps, &intention, &takenOver)
	})
	if errors.Is(err, errUnconfirmed) {
		// The body has not run. The row may hold the key on this server
		// (in progress, until its lock expires) and be missing on the
		// standby: either way a retry is safe.
		return nil, zero, storeErr(c.method, "claim (the body did not run)", err)
	}
	if err == nil {
		if steps, err = decodeSteps(steps, intention.Valid); err != nil {
			return nil, zero, storeErr(c.method, "read recorded steps", err)
		}
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
	r, found, err := s.readRow(ctx, s.exec, c)
	if err != nil {
		return nil, zero, err
	}
	if !found || r.expired {
		return nil, zero, errRowVanished
	}
	if replaysOutcome(r, c) {
		err := s.exec.withConn(ctx, func(q stmts, pc *pgconn.PgConn) error {
			return s.confirmReplication(ctx, q, pc, c, "", true)
		})
		if err != nil {
			if !errors.Is(err, ErrStore) {
				err = storeErr(c.method, "confirm replication", err)
			}
			return nil, zero, err
		}
	}
	if mismatched(r, c) {
		s.recordMismatch(ctx, c, r) // a statement of its own (mismatch.go)
	}
	out, err := settle(ctx, s, m, c, r)
	return nil, out, err
}

func runExternal[R any](ctx context.Context, s *Store, m *Method[R], ex *execution, body func(context.Context) (R, error)) (R, error) {
	var zero R
	c := ex.c
	bctx, cancel := context.WithCancelCause(context.WithValue(ctx, stepsCtx, ex))
	defer cancel(nil)
	stop := func() {}
	if s.cfg.heartbeat > 0 {
		stop = ex.heartbeat(bctx, m.lockTimeout(s), cancel)
	}

	start := time.Now()
	out, berr := func() (R, error) {
		defer stop() // before finalising, and on a panic too
		return body(bctx)
	}()
	ev := c.event()
	ev.Fence, ev.Duration, ev.Err = ex.fence, time.Since(start), berr
	s.recent.observe(c.method, ev.Duration)
	s.hook(ctx, s.cfg.hooks.Executed, ev)

	// Finalise even if the caller has gone: the side effect happened. The
	// writes are bounded by the finalise timeout instead.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
	defer fcancel()
	var resp []byte
	var errName, errMsg *string
	name, final := finalError(m, berr)
	switch {
	case berr == nil:
		var err error
		if resp, out, err = stored(m, out); err != nil {
			return zero, ex.finishUnrecorded(ctx, fctx, err)
		}
	case final:
		msg := storableText(berr.Error())
		errName, errMsg = &name, &msg
	case ex.unrecorded() != nil:
		// A step ran but its result is not on record: a retry would run it
		// again, so the key must not be released.
		return zero, ex.finishUnrecorded(ctx, fctx, ex.unrecorded())
	case ctx.Err() != nil || errors.Is(context.Cause(bctx), ErrLockLost):
		// Abandoned mid-work: how far it got is unknown, so the key stays
		// locked until the lock expires.
		return zero, berr
	default:
		if _, err := s.exec.Exec(fctx, s.q.Release, s.at(c.scope, c.method, c.key, ex.fence, ex.intention)...); err != nil {
			s.cfg.logger.ErrorContext(ctx, "could not release idempotency claim; it expires with its lock",
				"method", c.method, "key", c.key, "err", err)
		}
		return zero, berr
	}
	tag, err := s.execCommitting(fctx, s.q.FinishExternal, c.scope, c.method, c.key, resp, errName, errMsg, ex.fence, ex.intention)
	if errors.Is(err, errUnconfirmed) {
		// Stored here, perhaps, but not known to be on the standby: never
		// success. A retry replays it only once the standby has it.
		return zero, outcomeUnknown(c, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The database answered and refused the outcome: record that.
		return zero, ex.finishUnrecorded(ctx, fctx, fmt.Errorf("store outcome: %w", err))
	}
	if err != nil {
		return zero, storeErr(c.method, "store response", err)
	}
	if tag.RowsAffected() == 0 {
		return zero, ex.lockLost(ctx)
	}
	return out, berr
}

// finishUnrecorded stores ErrOutcomeNotRecorded, with cause in its message,
// as the call's outcome, and returns it. If even that cannot be stored the
// key stays locked until its lock expires: it is never released.
func (ex *execution) finishUnrecorded(ctx, fctx context.Context, cause error) error {
	s, c := ex.s, ex.c
	err := fmt.Errorf("idem: %s: key %q: %w: %w", c.method, c.key, ErrOutcomeNotRecorded, cause)
	name, msg := unrecordedName, storableText(err.Error())
	tag, serr := s.execCommitting(fctx, s.q.FinishExternal, c.scope, c.method, c.key, nil, &name, &msg, ex.fence, ex.intention)
	if serr != nil {
		s.cfg.logger.ErrorContext(ctx, "idempotent call ran but neither its outcome nor that failure could be stored; the key stays locked until its lock expires",
			"method", c.method, "scope", c.scope, "key", c.key, "fence", ex.fence, "err", err, "store_err", serr)
		return fmt.Errorf("%w (storing this failed too; the key stays locked until its lock expires: %w)", err, storeErr(c.method, "store outcome", serr))
	}
	if tag.RowsAffected() == 0 {
		return ex.lockLost(ctx)
	}
	s.cfg.logger.ErrorContext(ctx, "idempotent call ran but its outcome could not be recorded; the key replays that error",
		"method", c.method, "scope", c.scope, "key", c.key, "fence", ex.fence, "err", err)
	return err
}

// lockLost reports a finalise that found its claim taken over.
func (ex *execution) lockLost(ctx context.Context) error {
	s, c := ex.s, ex.c
	s.cfg.logger.ErrorContext(ctx, "idempotent attempt finished after its claim was taken over; its result is discarded",
		"method", c.method, "scope", c.scope, "key", c.key, "fence", ex.fence)
	ev := c.event()
	ev.Fence = ex.fence
	s.hook(ctx, s.cfg.hooks.LockLost, ev)
	return fmt.Errorf("idem: %s: key %q: %w", c.method, c.key, ErrLockLost)
}

// unrecorded returns why a step's result could not be recorded, or nil.
func (ex *execution) unrecorded() error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.unrec
}

// heartbeat extends the lock every interval while the body runs. If the lock
// turns out lost, the body's context is cancelled with ErrLockLost as its
// cause. stop ends the heartbeat and cancels an extension in flight, so it
// returns at once; each extension is bounded by the interval too.
func (ex *execution) heartbeat(ctx context.Context, lock time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	hctx, hcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(ex.s.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			c := ex.c
			qctx, qcancel := context.WithTimeout(hctx, ex.s.cfg.heartbeat)
			tag, err := ex.s.exec.Exec(qctx, ex.s.q.Extend, ex.s.at(c.scope, c.method, c.key, ex.fence, micros(lock), ex.intention)...)
			qcancel()
			if err == nil && tag.RowsAffected() == 0 {
				cancel(ErrLockLost)
				return
			}
		}
	}()
	return func() { hcancel(); wg.Wait() }
}

// Step runs fn as a named recovery point of the external-mode method whose
// context ctx is. The first time, fn runs and its result is recorded on the
// ledger row (only while this attempt still holds the key: otherwise the
// result is ErrLockLost and the caller must stop). After a takeover, a step
// already recorded returns its recorded result without running fn again, so
// "create ride → charge card → send receipt" charges once. Results are stored
// with encoding/json, as JSON text, so any value json.Marshal produces (NUL
// characters included) can be recorded.
//
// If fn succeeded but its result cannot be recorded (it does not encode, the
// database refuses it or cannot be reached), Step returns an error matching
// ErrOutcomeNotRecorded, and the call is never released for a retry to run
// fn again: unless the method still returns a response, the call's outcome
// becomes ErrOutcomeNotRecorded, replayed to every retry. Outside an
// idempotent call, Step simply runs fn.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	ex, ok := ctx.Value(stepsCtx).(*execution)
	if !ok {
		return fn(ctx)
	}
	if !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return zero, fmt.Errorf("idem: %s: step name %q must be valid UTF-8 without NUL bytes", ex.c.method, name)
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
	if err := ex.record(ctx, name, v); err != nil {
		return zero, err
	}
	return v, nil
}

// record stores a step's result. A failure other than a lost lock marks the
// execution so that it is never released.
func (ex *execution) record(ctx context.Context, name string, v any) error {
	s, c := ex.s, ex.c
	fail := func(cause error) error {
		err := fmt.Errorf("idem: %s: step %q ran but its result could not be recorded: %w: %w", c.method, name, ErrOutcomeNotRecorded, cause)
		ex.mu.Lock()
		if ex.unrec == nil {
			ex.unrec = err
		}
		ex.mu.Unlock()
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fail(fmt.Errorf("encode result: %w", err))
	}
	if !utf8.Valid(b) {
		return fail(errors.New("the encoded result is not valid UTF-8"))
	}
	q := s.q.Step
	if !ex.intention.Valid {
		q = s.q.StepLegacy // a row claimed before results were stored as text
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
	defer cancel()
	// A result recorded here but not on the standby would be lost by a
	// failover: execCommitting reports that as an error, so the step
	// counts as unrecorded and the key is never released.
	tag, err := s.execCommitting(wctx, q, c.scope, c.method, c.key, ex.fence, name, string(b), ex.intention)
	if err != nil {
		return fail(storeErr(c.method, "record step "+name, err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("idem: %s: step %q: %w", c.method, name, ErrLockLost)
	}
	ex.mu.Lock()
	if ex.steps == nil {
		ex.steps = map[string]json.RawMessage{}
	}
	ex.steps[name] = b
	ex.mu.Unlock()
	return nil
}

// decodeSteps turns the steps column into each step's JSON result. Rows with
// an intention hold each result as a JSON string of its JSON text (jsonb
// cannot hold a NUL character, JSON text escapes it); older rows hold the
// result itself.
func decodeSteps(col map[string]json.RawMessage, text bool) (map[string]json.RawMessage, error) {
	if !text {
		return col, nil
	}
	out := make(map[string]json.RawMessage, len(col))
	for name, v := range col {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("step %q: recorded result is not JSON text: %w", name, err)
		}
		out[name] = json.RawMessage(s)
	}
	return out, nil
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
