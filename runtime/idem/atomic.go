package idem

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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
	d, c, err := openAtomic[R, TTx](ctx, s, m, fingerprint, "Atomic")
	if err != nil {
		return zero, err
	}
	return retryAttempts(ctx, s, c, func() (R, error) {
		t, tx, bodyEnded, err := d.attempt(ctx, s, c)
		if err != nil {
			return zero, err
		}
		return atomicRun(ctx, s, m, c, t, func(ctx context.Context) (R, error) { return body(ctx, tx()) }, bodyEnded)
	})
}

// openAtomic is what Atomic and AtomicInTx (fn) do before the claim: the
// driver of TTx for s, m's settings checked, the call's key and scope read
// from ctx, and the caller's Outcome started.
func openAtomic[R, TTx any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, fn string) (driver[TTx], call, error) {
	d, err := driverFor[TTx](s, fn)
	if err != nil {
		return nil, call{}, err
	}
	if err := m.check(s, false); err != nil {
		return nil, call{}, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return nil, call{}, err
	}
	startOutcome(ctx, m.retention(s))
	return d, c, nil
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
		// Expired: take it over in this transaction.
		if fence, err = takeOver(ctx, s, t, c, m.retention(s)); err != nil {
			return zero, err
		}
		takenOver = true
	}
	out, berr := runBody(ctx, s, c, fence, takenOver, body)
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
	d, c, err := openAtomic[R, TTx](ctx, s, m, fingerprint, "AtomicInTx")
	if err != nil {
		return zero, err
	}
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
		fence, err = takeOver(ctx, s, t, c, m.retention(s))
		if errors.Is(err, errRowVanished) {
			return zero, fmt.Errorf("idem: %s: %w", c.method, err)
		}
		if err != nil {
			return zero, err
		}
		takenOver = true
	}
	out, berr := runBody(ctx, s, c, fence, takenOver, body)

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

// runBody runs a claimed call's body between its hooks: Claimed (and
// TakenOver when the claim took an expired key over), then Executed with
// the body's duration and error.
func runBody[R any](ctx context.Context, s *Store, c call, fence int64, takenOver bool, body func(context.Context) (R, error)) (R, error) {
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
	return out, berr
}
