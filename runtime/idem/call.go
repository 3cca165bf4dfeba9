package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// call is one idempotent invocation: who, which method, which request.
type call struct {
	scope, method, key string
	fp                 []byte
}

func (c call) event() Event {
	return Event{Method: c.method, Scope: c.scope, Key: c.key, Fingerprint: c.fp}
}

// newCall reads the key and scope from ctx and validates the key.
func (s *Store) newCall(ctx context.Context, method string, fp []byte) (call, error) {
	key, ok := KeyFrom(ctx)
	if !ok {
		return call{}, fmt.Errorf("%s: %w", method, ErrNoKey)
	}
	if err := s.cfg.keys.Validate(key); err != nil {
		return call{}, fmt.Errorf("%s: %w", method, err)
	}
	if len(fp) == 0 {
		return call{}, fmt.Errorf("idem: %s: empty fingerprint", method)
	}
	return call{scope: ScopeFrom(ctx), method: method, key: key, fp: fp}, nil
}

// ledgerRow is a row read back after a claim did not get the key.
type ledgerRow struct {
	fingerprint []byte
	status      string
	response    []byte
	errName     *string
	errMsg      *string
	steps       map[string]json.RawMessage
	fence       int64
	expired     bool
	lockedUntil *time.Time
	now         time.Time
}

// readRow runs the read statement. found is false when there is no row.
func (s *Store) readRow(ctx context.Context, q querier, c call) (r ledgerRow, found bool, err error) {
	return scanRow(q.QueryRow(ctx, s.q.read, s.now(), c.scope, c.method, c.key), c)
}

// scanRow scans the answer to the read statement.
func scanRow(row pgx.Row, c call) (r ledgerRow, found bool, err error) {
	err = row.Scan(
		&r.fingerprint, &r.status, &r.response, &r.errName, &r.errMsg, &r.steps, &r.fence,
		&r.expired, &r.lockedUntil, &r.now)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, storeErr(c.method, "read ledger row", err)
	}
	return r, true, nil
}

// querier is what readRow needs: a pool, a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// settle turns a row held by another request into the caller's answer: the
// stored response, a mismatch, or in progress. replayed reports a replay.
func settle[R any](ctx context.Context, s *Store, m *Method[R], c call, r ledgerRow) (R, error) {
	var zero R
	if string(r.fingerprint) != string(c.fp) {
		s.hook(ctx, s.cfg.hooks.Mismatch, c.event())
		s.cfg.logger.WarnContext(ctx, "idempotency key reused with a different request",
			"method", c.method, "scope", c.scope, "key", c.key,
			"stored", ShortHex(r.fingerprint), "got", ShortHex(c.fp))
		return zero, &MismatchError{Method: c.method, Key: c.key, Stored: r.fingerprint, Got: c.fp}
	}
	if r.status != StatusDone {
		retry := time.Second
		if r.lockedUntil != nil {
			retry = max(r.lockedUntil.Sub(r.now), time.Second)
		}
		s.hook(ctx, s.cfg.hooks.InProgress, c.event())
		return zero, &InProgressError{Method: c.method, Key: c.key, RetryAfter: retry}
	}
	setReplayed(ctx, true)
	s.hook(ctx, s.cfg.hooks.Replayed, c.event())
	if r.errName != nil {
		return zero, replayError(m, *r.errName, deref(r.errMsg))
	}
	out, err := decode(m, r.response)
	if err != nil {
		return zero, fmt.Errorf("idem: %s: decode stored response for key %q: %w", c.method, c.key, err)
	}
	return out, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func replayError[R any](m *Method[R], name, msg string) error {
	for _, f := range m.FinalErrors {
		if f.Name == name {
			return &ReplayedError{Name: name, Msg: msg, Sentinel: f.Err}
		}
	}
	return &ReplayedError{Name: name, Msg: msg}
}

// finalError reports whether err is one of the method's final errors and
// returns the sentinel's name.
func finalError[R any](m *Method[R], err error) (string, bool) {
	for _, f := range m.FinalErrors {
		if errors.Is(err, f.Err) {
			return f.Name, true
		}
	}
	return "", false
}

func encode[R any](m *Method[R], v R) ([]byte, error) {
	if m.Encode != nil {
		return m.Encode(v)
	}
	return json.Marshal(v)
}

func decode[R any](m *Method[R], b []byte) (R, error) {
	if m.Decode != nil {
		return m.Decode(b)
	}
	var v R
	err := json.Unmarshal(b, &v)
	return v, err
}

func (m *Method[R]) retention(s *Store) time.Duration {
	if m.Retention > 0 {
		return m.Retention
	}
	return s.cfg.retention
}

func (m *Method[R]) lockTimeout(s *Store) time.Duration {
	if m.LockTimeout > 0 {
		return m.LockTimeout
	}
	return s.cfg.lockTimeout
}

func (s *Store) hook(ctx context.Context, h func(context.Context, Event), e Event) {
	if h != nil {
		h(ctx, e)
	}
}

// storeErr wraps a ledger failure so that errors.Is(err, ErrStore) holds and
// the cause stays inspectable.
func storeErr(method, what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %w", ErrStore, method, what, err)
}

// retryable reports whether a transaction that failed with err should be
// tried again from the start: a serialization failure or deadlock, or a
// COMMIT whose outcome is unknown (the next attempt's read settles it).
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return false
}

// backoff sleeps before attempt n+1: base·2ⁿ⁻¹, capped at 1s, with full
// jitter. It returns early with ctx's error.
func (s *Store) backoff(ctx context.Context, n int) error {
	d := min(s.cfg.baseBackoff<<(n-1), time.Second)
	d = time.Duration(rand.Int64N(int64(d)) + 1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func micros(d time.Duration) int64 { return d.Microseconds() }
