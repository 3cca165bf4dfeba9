package idem

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// call is one idempotent invocation: who, which method, which request.
type call struct {
	scope, method, key string
	fp                 []byte
}

func (c call) event() Event {
	return Event{Method: c.method, Scope: c.scope, Key: c.key, Fingerprint: c.fp}
}

// newCall reads the key and scope from ctx (noting the key in ctx's
// Outcome) and validates the key.
func (s *Store) newCall(ctx context.Context, method string, fp []byte) (call, error) {
	key, fallback, ok := keyFrom(ctx)
	noteKey(ctx, key, fallback)
	if !ok {
		return call{}, fmt.Errorf("%s: %w", method, ErrNoKey)
	}
	if err := s.cfg.keys.Validate(key); err != nil {
		return call{}, fmt.Errorf("%s: %w", method, err)
	}
	if len(fp) == 0 {
		return call{}, fmt.Errorf("idem: %s: empty fingerprint", method)
	}
	scope := ScopeFrom(ctx)
	if err := ValidateScope(scope); err != nil {
		return call{}, fmt.Errorf("%s: %w", method, err)
	}
	return call{scope: scope, method: method, key: key, fp: fp}, nil
}

// ledgerRow is a row read back after a claim did not get the key.
type ledgerRow struct {
	fingerprint []byte
	status      string
	response    []byte
	errName     *string
	errMsg      *string
	fence       int64
	intention   pgtype.UUID
	expired     bool
	lockedUntil *time.Time
	now         time.Time
	syncRep     bool // the session's commits wait for a synchronous standby
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

// stored encodes the body's response v for the ledger and returns the bytes
// and the value every caller gets: v decoded from those bytes. The first
// caller and every replay decode the same bytes, so they get equal values
// (reflect.DeepEqual) by construction, whatever v held that the encoding does
// not carry: a time.Time's monotonic reading and *time.Location (time.Local,
// a named zone) come back as the offset written in the bytes, an empty slice
// or map tagged omitempty as nil.
//
// An error means v cannot be stored faithfully (a NaN or infinite float, a
// string that is not valid UTF-8, a marshaler that fails): nothing was
// stored. Atomic mode returns it before COMMIT, so the work rolls back with
// the claim.
func stored[R any](m *Method[R], v R) ([]byte, R, error) {
	var zero R
	b, err := encode(m, v)
	if err != nil {
		return nil, zero, fmt.Errorf("encode response: %w", err)
	}
	out, err := decode(m, b)
	if err != nil {
		return nil, zero, fmt.Errorf("decode the encoded response: %w", err)
	}
	return b, out, nil
}

func encode[R any](m *Method[R], v R) ([]byte, error) {
	if m.Encode != nil {
		return m.Encode(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		var uv *json.UnsupportedValueError
		if errors.As(err, &uv) {
			return nil, fmt.Errorf("%w (JSON has no NaN or infinity: return a pointer left nil, or a string)", err)
		}
		return nil, err
	}
	if replacedUTF8(b) {
		return nil, errors.New("a string in the response is not valid UTF-8, and JSON would store U+FFFD in its place: use []byte for binary data")
	}
	return b, nil
}

// replacedUTF8 reports whether encoding/json replaced invalid UTF-8 in b:
// it writes the escape \ufffd for each invalid byte (and writes a genuine
// U+FFFD as the character itself), so an escape, not a backslash escaped
// before the letters "ufffd", marks a loss.
func replacedUTF8(b []byte) bool {
	const esc = `\ufffd`
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(esc))
		if j < 0 {
			return false
		}
		j += i
		n := 0 // backslashes before this one
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + len(esc)
	}
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

// check refuses a method whose settings break the ledger's rules: a
// retention under MinRetention, or (external mode) shorter than the lock, so
// that a live call could be reclaimed as a new request.
func (m *Method[R]) check(s *Store, external bool) error {
	ret := m.retention(s)
	if ret < MinRetention {
		return fmt.Errorf("idem: %s: retention %s is under the minimum of %s", m.Name, ret, MinRetention)
	}
	if lock := m.lockTimeout(s); external && ret < lock {
		return fmt.Errorf("idem: %s: retention %s is shorter than the lock timeout %s", m.Name, ret, lock)
	}
	return nil
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
	if err := ctx.Err(); err != nil {
		// A select on an ended context and a timer that already fired
		// picks either: never wait, or report success, past the end.
		return err
	}
	d := s.cfg.baseBackoff
	for i := 1; i < n && d < time.Second; i++ { // doubling stops at the cap: no overflow
		d *= 2
	}
	d = min(d, time.Second)
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

// unrecordedName is the error name stored for ErrOutcomeNotRecorded. The
// colon keeps it apart from every Go identifier a final error can have.
const unrecordedName = "idem:outcome-not-recorded"

// storableText makes s storable in a text column: invalid UTF-8 becomes
// U+FFFD and NUL bytes, which PostgreSQL text cannot hold, are dropped. Error
// messages from third parties (a bank's error body) carry both.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// newIntention returns a random id for a new intention: the request a ledger
// row records from its first claim until its retention ends. Takeovers keep
// it; a key reused after its retention gets a new one.
func newIntention() pgtype.UUID {
	u := pgtype.UUID{Valid: true}
	_, _ = cryptorand.Read(u.Bytes[:])  // never fails (crypto/rand.Read panics instead)
	u.Bytes[6] = u.Bytes[6]&0x0f | 0x40 // version 4
	u.Bytes[8] = u.Bytes[8]&0x3f | 0x80 // RFC 9562 variant
	return u
}
