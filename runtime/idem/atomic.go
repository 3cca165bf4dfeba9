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
	"github.com/jackc/pgx/v5/pgxpool"
)

// errCommitUnknown marks a COMMIT whose outcome is unknown (the connection
// failed while it was in flight). The next attempt reads the ledger row and so
// settles it: the row is there (replay) or it is not (run again).
var errCommitUnknown = errors.New("idem: commit outcome unknown")

// errRowVanished marks a claim that found the key held but no row to read
// (the holder rolled back or the row was swept in between): try again.
var errRowVanished = errors.New("idem: ledger row vanished between claim and read")

// Atomic runs body at most once per (scope, method, key) with the claim, the
// work and the stored response in one transaction: either all of them commit
// or none does, so a retry after any failure simply runs again.
//
// The key and scope come from ctx. A retry whose key is done gets the stored
// response (or stored final error) after one round trip, and
// ContextWithOutcome's Outcome reports the replay. A concurrent twin blocks on the
// ledger's primary key until the first attempt commits, then replays; if the
// first has not committed within the claim wait (WithClaimWait) the twin
// gets an *InProgressError and gives its connection back. A key
// reused with another fingerprint gets a *MismatchError. Serialization
// failures and deadlocks retry the whole transaction with jittered backoff. If
// the ledger cannot be reached the body does not run (errors.Is(err, ErrStore)).
//
// A body error rolls everything back and nothing is stored, unless errors.Is
// matches one of m.FinalErrors: then the error is stored and replayed. A body
// panic rolls back and propagates.
//
// The response returned, first time and on replay, is the one decoded from
// the stored bytes (see Method.Encode). One that cannot be stored (a NaN
// float, a string that is not UTF-8) is an error and rolls everything back.
//
// TTx, the transaction body takes, picks the driver (driver.go): a pgx.Tx
// on a store made by NewStore, where BEGIN travels with the claim and
// COMMIT with the response; or a *sql.Tx on a store made by NewSQLStore,
// where database/sql sends one statement at a time, so the transaction
// costs more round trips (see docs/sql.md). The other kind of store is an
// error before anything runs. body must not commit or roll back tx (return
// an error to roll back): a pgx.Tx refuses, and on a *sql.Tx, which cannot
// refuse, Atomic returns an error wrapping the refusal, but what the body
// committed stays committed.
func Atomic[R, TTx any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	d, err := driverFor[TTx](s, "Atomic")
	if err != nil {
		return zero, err
	}
	if err := m.check(s, false); err != nil {
		return zero, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return zero, err
	}
	startOutcome(ctx, m.retention(s))
	return retryAttempts(ctx, s, c, func() (R, error) {
		t, tx, bodyEnded, err := d.attempt(ctx, s, c)
		if err != nil {
			return zero, err
		}
		return atomicRun(ctx, s, m, c, t, func(ctx context.Context) (R, error) { return body(ctx, tx()) }, bodyEnded)
	})
}

// retryAttempts runs attempt until it succeeds, fails for good, or the
// store's attempts run out: serialization failures, deadlocks, unknown
// COMMIT outcomes and rows that vanished are tried again after a backoff,
// and an expired inline key that was freed at once.
func retryAttempts[R any](ctx context.Context, s *Store, c call, attempt func() (R, error)) (R, error) {
	var zero R
	for n := 1; ; n++ {
		out, err := attempt()
		if err == nil || n >= s.cfg.maxAttempts ||
			!(retryable(err) || errors.Is(err, errCommitUnknown) || errors.Is(err, errRowVanished) || errors.Is(err, errKeyFreed)) {
			return out, err
		}
		s.cfg.logger.InfoContext(ctx, "idempotent transaction retried", "method", c.method, "key", c.key, "attempt", n, "err", err)
		if errors.Is(err, errKeyFreed) {
			continue // not contention: claim the freed key at once
		}
		if berr := s.backoff(ctx, n); berr != nil {
			return zero, fmt.Errorf("%w (not retried: %w)", err, berr)
		}
	}
}

// atomicRun is one attempt of Atomic on the transaction t
// carries: the claim, the body (which reports whether it ended the
// transaction itself through bodyEnded), and the response with COMMIT.
func atomicRun[R any](ctx context.Context, s *Store, m *Method[R], c call, t attemptTx, body func(context.Context) (R, error), bodyEnded func() bool) (R, error) {
	var zero R
	end := endFailed
	defer func() { t.done(ctx, s, end) }()

	// BEGIN and the claim, which also reads the key's row, travel in one
	// round trip where the transport pipelines. The claim alone decides
	// whether the body runs; the row answers a key another request holds
	// (read again in a statement of its own when the claim waited for a
	// twin's commit, see claim).
	fence, claimed, r, found, err := claim(ctx, s, t, "BEGIN", m.retention(s), c)
	if err != nil {
		return zero, err
	}
	takenOver := false
	switch {
	case claimed:
	case !found:
		// The key's row went before it could be read (swept, or the
		// holder rolled back): try again.
		return zero, errRowVanished
	case !r.expired && mismatched(r, c):
		// The refusal is recorded with this transaction's COMMIT, in
		// place of its ROLLBACK (mismatch.go).
		if s.recordMismatchTx(ctx, t, c, r) {
			end = endCommitted
		}
		return settle(ctx, s, m, c, r)
	case !r.expired:
		end = endReplayed
		// The answer is already the caller's: end the read-only
		// transaction without making the caller wait for it.
		if replaysOutcome(r, c) && r.syncRep {
			// Confirm the standby has the row first; the transaction ends
			// with the confirmation (replication.go).
			end = endCommitted
			if err := t.confirmReplay(ctx, s, c); err != nil {
				return zero, err
			}
		}
		return settle(ctx, s, m, c, r)
	default:
		// Expired: take it over in this transaction. No row back means
		// another request took it over first.
		err := t.QueryRow(ctx, s.q.takeover, s.now(), c.scope, c.method, c.key, c.fp, micros(m.retention(s)), newIntention()).Scan(&fence)
		if errors.Is(err, pgx.ErrNoRows) {
			return zero, errRowVanished
		}
		if err != nil {
			return zero, storeErr(c.method, "take over expired key", err)
		}
		takenOver = true
	}
	ev := c.event()
	ev.Fence = fence
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	if takenOver {
		s.hook(ctx, s.cfg.hooks.TakenOver, ev)
	}

	start := time.Now()
	out, berr := body(ctx)
	ev.Duration, ev.Err = time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)
	if bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}

	resp, errName, errMsg, out, err := outcome(m, c, out, berr)
	if err != nil {
		return zero, err
	}

	err = commit(ctx, s, c, t, s.q.finish, []any{c.scope, c.method, c.key, resp, errName, errMsg, fence}, "store response and commit",
		fmt.Errorf("%w: %s: the stored response did not match exactly one ledger row; is the ledger's primary key missing?", ErrStore, c.method))
	if err != nil {
		return zero, err
	}
	end = endCommitted
	return out, berr
}

// commit sends stmt and COMMIT on t, detached from ctx: a caller going
// away must not cancel a COMMIT that waits for a synchronous standby (see
// replication.go). They travel in one round trip where t pipelines. stmt
// divides by zero to refuse the commit (the COMMIT then rolls back):
// refused is the error for that. what names the step in other errors.
func commit(ctx context.Context, s *Store, c call, t attemptTx, stmt string, args []any, what string, refused error) error {
	cctx, cancel := t.commitContext(ctx, s)
	defer cancel()
	pc := t.pgConn()
	takeUnreplicated(pc)
	commitTag, err := t.finish(cctx, stmt, args, "COMMIT")
	if errors.Is(err, errBodyEndedTx) {
		// A *sql.Tx the body committed or rolled back itself.
		return fmt.Errorf("idem: %s: %w", c.method, err)
	}
	if isDivisionByZero(err) {
		// A definite failure, not an unknown outcome: the COMMIT rolled
		// back.
		return refused
	}
	if err == nil && commitTag != "COMMIT" {
		return fmt.Errorf("%w: %s: transaction was rolled back at commit (%s)", ErrStore, c.method, commitTag)
	}
	if uerr := s.unconfirmed(cctx, pc); uerr != nil {
		// Committed locally, perhaps, but not known to be on the standby:
		// never success. A retry replays the row only once the standby
		// has it (confirmReplication).
		return outcomeUnknown(c, uerr)
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			// No answer from the server: the commit may or may not have
			// happened. Never guess; the next attempt reads the row (or
			// its INSERT conflicts with it).
			return storeErr(c.method, "commit", fmt.Errorf("%w: %w", errCommitUnknown, err))
		}
		return storeErr(c.method, what, err)
	}
	return nil
}

// outcome is what the finish statement stores for the body's answer: the
// response (and the value every caller gets, decoded from it), or a final
// error's name and message. Any other body error is returned as err: the
// work rolls back and nothing is stored.
func outcome[R any](m *Method[R], c call, out R, berr error) (resp []byte, errName, errMsg *string, _ R, err error) {
	if berr != nil {
		name, final := finalError(m, berr)
		if !final {
			return nil, nil, nil, out, berr
		}
		msg := storableText(berr.Error())
		return nil, &name, &msg, out, nil
	}
	if resp, out, err = stored(m, out); err != nil {
		return nil, nil, nil, out, fmt.Errorf("idem: %s: %w", c.method, err)
	}
	return resp, nil, nil, out, nil
}

// replaysOutcome reports whether settle answers r with the outcome it
// stores: the row is done and holds this request.
func replaysOutcome(r ledgerRow, c call) bool {
	return r.status == StatusDone && string(r.fingerprint) == string(c.fp)
}

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

// isDivisionByZero reports the finish statement's refusal to store a
// response on anything but exactly one row.
func isDivisionByZero(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012"
}

// rollback ends the connection's transaction even if ctx is done, bounded by
// the finalise timeout. If that fails the connection is closed, so the pool
// never reuses it mid-transaction.
func (s *Store) rollback(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// AtomicInTx is Atomic inside the caller's transaction tx. The claim, the
// work and the response are written under a savepoint, so a refused claim or
// a failed body rolls back to it and leaves tx usable; everything commits (or
// not) with tx. A concurrent twin waits for tx to end, for at most the claim
// wait (then it gets an *InProgressError). Serialization failures
// are returned, not retried: only the caller can retry its transaction.
// tx is a pgx.Tx on a store made by NewStore, or a *sql.Tx on one made by
// NewSQLStore, as in Atomic.
func AtomicInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	d, err := driverFor[TTx](s, "AtomicInTx")
	if err != nil {
		return zero, err
	}
	if err := m.check(s, false); err != nil {
		return zero, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return zero, err
	}
	startOutcome(ctx, m.retention(s))

	return atomicInTxRun(ctx, s, m, c, d.inTx(tx), func(ctx context.Context) (R, error) { return body(ctx, tx) })
}

// atomicInTxRun is AtomicInTx on the caller's transaction that t carries.
func atomicInTxRun[R any](ctx context.Context, s *Store, m *Method[R], c call, t ledgerTx, body func(context.Context) (R, error)) (R, error) {
	var zero R
	// The savepoint and the claim, which also reads the key's row, travel
	// in one round trip where t pipelines, as in Atomic.
	const sp = "idem_claim"
	fence, claimed, r, found, err := claim(ctx, s, t, "SAVEPOINT "+sp, m.retention(s), c)
	released := false
	undo := func() error {
		if released {
			return nil
		}
		released = true
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
		defer cancel()
		// One simple-protocol string: an aborted transaction refuses to
		// prepare anything but its own end, RELEASE included.
		_, err := t.Exec(uctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp)
		return err
	}
	defer func() { _ = undo() }() // error paths and panics
	if err != nil {
		return zero, err
	}
	takenOver := false
	switch {
	case claimed:
	case !found:
		return zero, fmt.Errorf("idem: %s: %w", c.method, errRowVanished)
	case !r.expired:
		if mismatched(r, c) {
			// Recorded outside the caller's transaction (mismatch.go).
			s.recordMismatchBehind(ctx, c, r)
		}
		if replaysOutcome(r, c) && r.syncRep {
			if err := s.confirmInTx(ctx, t, c); err != nil {
				return zero, err
			}
		}
		return settle(ctx, s, m, c, r)
	default:
		err := t.QueryRow(ctx, s.q.takeover, s.now(), c.scope, c.method, c.key, c.fp, micros(m.retention(s)), newIntention()).Scan(&fence)
		if errors.Is(err, pgx.ErrNoRows) {
			return zero, fmt.Errorf("idem: %s: %w", c.method, errRowVanished)
		}
		if err != nil {
			return zero, storeErr(c.method, "take over expired key", err)
		}
		takenOver = true
	}
	ev := c.event()
	ev.Fence = fence
	s.hook(ctx, s.cfg.hooks.Claimed, ev)
	if takenOver {
		s.hook(ctx, s.cfg.hooks.TakenOver, ev)
	}

	start := time.Now()
	out, berr := body(ctx)
	ev.Duration, ev.Err = time.Since(start), berr
	s.hook(ctx, s.cfg.hooks.Executed, ev)

	resp, errName, errMsg, out, err := outcome(m, c, out, berr)
	if err != nil {
		return zero, err
	}
	_, err = t.finish(ctx, s.q.finish, []any{c.scope, c.method, c.key, resp, errName, errMsg, fence}, "RELEASE SAVEPOINT "+sp)
	if isDivisionByZero(err) {
		err = errors.New("the stored response did not match exactly one ledger row; is the ledger's primary key missing?")
	}
	if err != nil {
		return zero, storeErr(c.method, "store response", err)
	}
	released = true
	return out, berr
}
