package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The claim: the statement that decides whether a call's body runs. For
// the ledger's modes it is claimNew (queries.go), one INSERT that also
// reads the row holding the key, sent with BEGIN or a SAVEPOINT by the
// driver (pgxdriver.go, sqldriver.go); for external mode claimExternal
// (external.go); for inline mode the body's own INSERT (inlinetx.go,
// lostInlineClaim).

// claim sends begin (BEGIN, or a SAVEPOINT in the caller's transaction) and
// the claim, bounded by the store's claim wait, on t (in one round trip
// where t pipelines); the claim statement also reads the row that holds the
// key (see claimNew), so a replay needs no other statement. claimed reports
// that the insert made the row (fence is its token); otherwise found and r
// are the key's row. A claim that waited out the claim wait on a twin's
// uncommitted row is an *InProgressError. Only a claim that waited for a
// twin to commit sends a second statement: the read, which sees the twin's
// row.
func claim(ctx context.Context, s *Store, t ledgerTx, begin string, retention time.Duration, c call) (fence int64, claimed bool, r ledgerRow, found bool, err error) {
	var h heldRow
	err = t.claim(ctx, begin, s.q.claimNew, []any{s.now(), c.scope, c.method, c.key, c.fp, micros(retention), newIntention(), s.claimWaitSetting()}, h.dest())
	if err == nil {
		claimed, fence = h.claimed.Valid, h.claimed.Int64
		if !claimed {
			// The claim inserts nothing when its snapshot shows a row, so
			// a claimed key has no held row. A held row that a sweep has
			// deleted since is expired: the takeover finds it gone
			// (errRowVanished) and the attempt starts again.
			r, found, err = h.row()
		}
	}
	if err == nil && !claimed && !found {
		r, found, err = s.readRow(ctx, t, c)
	}
	switch {
	case err == nil, errors.Is(err, ErrStore):
	case isLockTimeout(err):
		err = s.claimWaitEnded(ctx, c)
	default:
		err = storeErr(c.method, "claim", err)
	}
	return fence, claimed, r, found, err
}

// heldRow is the answer to the claim statement: the fence of the row it
// made, or the columns of the row that held the key, all NULL when none did.
type heldRow struct {
	claimed      pgtype.Int8
	fingerprint  []byte
	status       pgtype.Text
	response     []byte
	errName      *string
	errMsg       *string
	steps        []byte // jsonb, as text: database/sql cannot scan into a map
	fence        pgtype.Int8
	intention    pgtype.UUID
	expired      pgtype.Bool
	lockedUntil  *time.Time
	now          time.Time
	syncRep      bool
	waitRestored string
}

func (h *heldRow) dest() []any {
	return []any{&h.claimed, &h.fingerprint, &h.status, &h.response, &h.errName, &h.errMsg, &h.steps,
		&h.fence, &h.intention, &h.expired, &h.lockedUntil, &h.now, &h.syncRep, &h.waitRestored}
}

// row returns the held row, found false when no row held the key.
func (h *heldRow) row() (ledgerRow, bool, error) {
	if !h.status.Valid {
		return ledgerRow{}, false, nil
	}
	steps, err := stepsMap(h.steps)
	if err != nil {
		return ledgerRow{}, false, err
	}
	return ledgerRow{
		fingerprint: h.fingerprint, status: h.status.String, response: h.response,
		errName: h.errName, errMsg: h.errMsg, steps: steps, fence: h.fence.Int64,
		intention: h.intention, expired: h.expired.Bool, lockedUntil: h.lockedUntil, now: h.now, syncRep: h.syncRep,
	}, true, nil
}

// stepsMap decodes the steps column's JSON text (nil when NULL).
func stepsMap(b []byte) (map[string]json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	var steps map[string]json.RawMessage
	if err := json.Unmarshal(b, &steps); err != nil {
		return nil, fmt.Errorf("decode recorded steps: %w", err)
	}
	return steps, nil
}

// claimWaitSetting is the claim wait as a lock_timeout value, in whole
// milliseconds rounded up (0 would turn the bound off).
func (s *Store) claimWaitSetting() string {
	return fmt.Sprintf("%dms", (s.cfg.claimWait+time.Millisecond-1)/time.Millisecond)
}

// claimWaitEnded answers a claim that waited out the claim wait on a key a
// concurrent attempt holds: in progress, retry shortly.
func (s *Store) claimWaitEnded(ctx context.Context, c call) error {
	s.hook(ctx, s.cfg.hooks.InProgress, c.event())
	s.cfg.logger.InfoContext(ctx, "idempotency key held by an attempt that did not commit within the claim wait",
		"method", c.method, "scope", c.scope, "key", c.key, "claim_wait", s.cfg.claimWait)
	return &InProgressError{Method: c.method, Key: c.key, RetryAfter: time.Second}
}

// isLockTimeout reports a lock wait ended by lock_timeout (55P03).
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// readRow runs the read statement. found is false when there is no row.
func (s *Store) readRow(ctx context.Context, q stmts, c call) (r ledgerRow, found bool, err error) {
	return scanRow(q.QueryRow(ctx, s.q.read, s.now(), c.scope, c.method, c.key), c)
}

// scanRow scans the answer to the read statement.
func scanRow(row pgx.Row, c call) (r ledgerRow, found bool, err error) {
	var steps []byte // jsonb, as text: database/sql cannot scan into a map
	err = row.Scan(
		&r.fingerprint, &r.status, &r.response, &r.errName, &r.errMsg, &steps, &r.fence, &r.intention,
		&r.expired, &r.lockedUntil, &r.now, &r.syncRep)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err == nil {
		r.steps, err = stepsMap(steps)
	}
	if err != nil {
		return r, false, storeErr(c.method, "read ledger row", err)
	}
	return r, true, nil
}

// takeOver claims an expired key in t's transaction and returns the new
// fence. No row back means another request took it over first
// (errRowVanished).
func takeOver(ctx context.Context, s *Store, t ledgerTx, c call, retention time.Duration) (int64, error) {
	var fence int64
	err := t.QueryRow(ctx, s.q.takeover, s.now(), c.scope, c.method, c.key, c.fp, micros(retention), newIntention()).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errRowVanished
	}
	if err != nil {
		return 0, storeErr(c.method, "take over expired key", err)
	}
	return fence, nil
}
