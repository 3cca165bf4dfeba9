package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Atomic runs body with its outcome recorded under (scope, method, key) in
// the same transaction: either the work and the ledger row commit together
// or neither does, so a retry after any failure simply runs again, and at
// most one run's work ever commits per key.
//
// The key and scope come from ctx. body runs in a transaction, after the
// key's lock (keylock.go), and the ledger row is written once, with the
// outcome, in the statement sent with COMMIT. A key that already has a
// row refuses that record: the transaction rolls back, undoing body's
// work, and the key's row answers: the stored response (or stored final
// error), which ContextWithOutcome's Outcome reports as a replay, or a
// *MismatchError for a key reused with another fingerprint. A call that
// may be a retry (ContextWithRetry, a method whose recent calls were
// mostly replays, or a store made WithLookupFirst; see hint.go) looks the
// key up first instead, in one autocommit statement, and a key that is
// done answers at once without running body. The answer is the same
// either way; only the cost differs. Twins queue on the key's lock: the
// first's body runs, and each twin's runs once the first ended (its
// record then refused by the first's row, which answers it: a replay),
// or gets an *InProgressError once it waited the claim wait
// (WithClaimWait). A body error is also answered from the key's row when
// the key has one (a twin's or an earlier attempt's work may be why the
// body failed); otherwise it is returned as is. Serialization failures
// and deadlocks retry the whole attempt, lookup first, with jittered
// backoff. If the ledger cannot be reached the body does not run
// (errors.Is(err, ErrStore)).
//
// Hooks: Claimed (and TakenOver for an expired key) fires before every run
// of body, Executed after it; a run whose record was refused then fires
// Replayed (or Mismatch) with the answer it returns. An unmarked retry
// therefore fires Claimed and Executed, then Replayed.
//
// A body error rolls everything back and nothing is stored, unless errors.Is
// matches one of m.FinalErrors: then the error is stored and replayed. A body
// panic rolls back and propagates.
//
// The response returned, first time and on replay, is the one decoded from
// the stored bytes (see Method.Encode). One that cannot be stored (a NaN
// float, a string that is not UTF-8) is an error and rolls everything back.
//
// TTx, the transaction body takes, is the one the store's driver gives
// (driver.go, chosen when the store is made): a pgx.Tx on a store made by
// NewStore, where BEGIN travels with the body's first statement and COMMIT
// with the ledger row; or a *sql.Tx on a store made by NewSQLStore, where database/sql sends one statement at a time, so the
// transaction costs more round trips (see docs/sql.md). The other kind of
// store is an error before anything runs. body must not commit or roll
// back tx (return an error to roll back): a pgx.Tx refuses, and on a
// *sql.Tx, which cannot refuse, Atomic returns an error wrapping the
// refusal, but what the body committed stays committed. body must send
// its work through tx: work sent on another connection is not undone when
// a twin's record wins.
func Atomic[R, TTx any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	d, c, err := openAtomic[R, TTx](ctx, s, m, fingerprint, "Atomic")
	if err != nil {
		return zero, err
	}
	run := func(lookup bool) (R, error) {
		t, tx, bodyEnded, err := d.attempt(ctx, s, c)
		if err != nil {
			return zero, err
		}
		return atomicRun(ctx, s, m, c, t, func(ctx context.Context) (R, error) { return body(ctx, tx()) }, bodyEnded, lookup)
	}
	lookup := s.lookupFirst(ctx, c)
	return retryAttempts(ctx, s, c, func() (R, error) {
		out, err := run(lookup)
		if !lookup && errors.Is(err, errRowVanished) {
			// A record refused by a row no lookup answers from: an
			// expired one, which only a record with the fence a lookup
			// saw takes over. At once, with the lookup.
			out, err = run(true)
		}
		// Every later attempt looks up first: it settles an unknown
		// COMMIT, and takes an expired key over.
		lookup = true
		return out, err
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

// atomicRun is one attempt of Atomic on the connection t carries: the
// lookup if lookup is set (hint.go), then the body (which reports whether
// it ended the transaction itself through bodyEnded), and the ledger row
// with COMMIT. Without the lookup the record is the fresh form, and a row
// the key already had refuses it: lost then looks the key up and answers.
// Each attempt adds one call to its method's replay rate (hint.go).
func atomicRun[R any](ctx context.Context, s *Store, m *Method[R], c call, t attemptTx, body func(context.Context) (R, error), bodyEnded func() bool, lookup bool) (R, error) {
	var zero R
	defer t.done(ctx, s)
	confirm := func(ctx context.Context) error { return t.confirmReplay(ctx, s, c) }
	// A mismatch is recorded on the attempt's connection, outside any
	// transaction, before the answer (mismatch.go).
	refused := func(r ledgerRow) { s.recordMismatchOn(ctx, t, c, r) }

	citus, err := s.onCitus(ctx, t)
	if err != nil {
		return zero, storeErr(c.method, "lookup", err)
	}
	var (
		r     ledgerRow
		found bool
	)
	if lookup {
		if r, found, err = s.readRow(ctx, t, c); err != nil {
			return zero, err
		}
		if answers(r, found) {
			s.replays.observe(c.method, true)
			return answer(ctx, s, m, c, r, confirm, refused)
		}
	}
	// No row, or an expired one the record statement takes over; or no
	// lookup: the fresh record, which any row refuses.
	seen := int64(0)
	if found {
		seen = r.fence
	}
	if err := t.open(ctx); err != nil {
		if t.keyWaitEnded() {
			return lost[R](ctx, s, m, c, t, err, false, confirm, refused)
		}
		return zero, storeErr(c.method, "begin", err)
	}
	out, berr := runBody(ctx, s, c, seen+1, found, body)
	if bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	resp, errName, errMsg, out, err := outcome(m, c, out, berr)
	if err != nil {
		return lost[R](ctx, s, m, c, t, err, false, confirm, refused)
	}
	prelude, stmt, args := s.record(citus, false, c, m.retention(s), seen, resp, errName, errMsg)
	err = commit(ctx, s, c, t, prelude, stmt, args, "store response and commit", errRecordRefused)
	if err != nil {
		if definite(err) {
			s.replays.observe(c.method, errors.Is(err, errRecordRefused))
			return lost[R](ctx, s, m, c, t, err, true, confirm, refused)
		}
		return zero, err
	}
	s.replays.observe(c.method, false)
	return out, berr
}

// record returns atomic mode's record statement for a lookup that saw
// fence seen (0: no row), its prelude and its arguments: the key's row,
// with fence seen+1, the outcome, and the claim wait. Atomic sends the
// fresh form for no row (ledger.RecordForms), the takeover form, which also
// takes seen, for an expired one; AtomicInTx the takeover form always
// (RecordInTx). On Citus, it is RecordCitus, after the claim wait's SET
// LOCAL statements (citusClaimWait) and without the claim wait.
func (s *Store) record(citus, inTx bool, c call, retention time.Duration, seen int64, resp []byte, errName, errMsg *string) (prelude []string, stmt string, args []any) {
	fresh := seen == 0 && !inTx
	args = s.at(c.scope, c.method, c.key, c.fp, micros(retention), newIntention(), seen+1)
	if !fresh {
		args = append(args, seen)
	}
	args = append(args, resp, errName, errMsg)
	switch {
	case citus:
		return s.citusClaimWait(), s.q.RecordCitus.Form(fresh), args
	case inTx:
		return nil, s.q.RecordInTx, append(args, s.claimWaitSetting())
	}
	return nil, s.q.Record.Form(fresh), append(args, s.claimWaitSetting())
}

// definite reports a record (or its COMMIT) that certainly did not
// commit: the server answered with an error, or the record statement
// refused. An unknown outcome (no answer, or a commit not known to have
// reached the standby) is not: the next attempt's lookup settles it.
func definite(err error) bool {
	if errors.Is(err, errCommitUnknown) || errors.Is(err, errUnconfirmed) || errors.Is(err, errBodyEndedTx) {
		return false
	}
	var pgErr *pgconn.PgError
	return errors.Is(err, errRecordRefused) || errors.As(err, &pgErr)
}

// answers reports whether the key's row r, read by a lookup (found false:
// no row), answers the call: a row that has not expired. An expired row is
// taken over by the record statement.
func answers(r ledgerRow, found bool) bool {
	return found && !r.expired
}

// answer turns the key's finished row r, read by a lookup, into the
// caller's answer: a replay (confirmed on the synchronous standby first
// where commits wait for one), the stored final error, or a mismatch
// (recorded by refused first).
func answer[R any](ctx context.Context, s *Store, m *Method[R], c call, r ledgerRow, confirm func(context.Context) error, refused func(ledgerRow)) (R, error) {
	var zero R
	switch {
	case mismatched(r, c):
		refused(r)
	case replaysOutcome(r, c) && r.syncRep:
		if err := confirm(ctx); err != nil {
			return zero, err
		}
	}
	return settle(ctx, s, m, c, r)
}

// lost answers an attempt whose body's transaction did not commit: cause
// is the body's error (or its unstorable response), or, when recording,
// the record statement's failure. The transaction is rolled back, and the
// key looked up again: a twin that recorded the key since answers
// (answer), whatever the cause; otherwise cause does. A record refused
// with no row to answer from tries again (errRowVanished), and one that
// waited out the claim wait on a twin's row, or on the key's lock, is in
// progress.
func lost[R any](ctx context.Context, s *Store, m *Method[R], c call, t ledgerTx, cause error, recording bool, confirm func(context.Context) error, refused func(ledgerRow)) (R, error) {
	var zero R
	if err := t.abandon(ctx); err != nil {
		return zero, fmt.Errorf("%w (and rolling back failed: %w)", cause, storeErr(c.method, "roll back", err))
	}
	r, found, rerr := s.readRow(ctx, t, c)
	if rerr == nil && answers(r, found) {
		return answer(ctx, s, m, c, r, confirm, refused)
	}
	if rerr != nil && (t.keyWaitEnded() || (recording && isLockTimeout(cause))) {
		// The key could not be read: it may be done by now, so "in
		// progress" would be a guess that a later answer contradicts.
		// The read's failure is the answer (ErrStore: a retry settles it).
		return zero, rerr
	}
	switch {
	case t.keyWaitEnded():
		// The key's lock waited out the claim wait (the body's first
		// statement, or the record statement if the body sent none,
		// failed on it): a twin holds the key, whatever the body then
		// returned.
		return zero, s.claimWaitEnded(ctx, c)
	case !recording:
	case errors.Is(cause, errRecordRefused):
		return zero, fmt.Errorf("idem: %s: %w", c.method, errRowVanished)
	case isLockTimeout(cause):
		return zero, s.claimWaitEnded(ctx, c)
	}
	return zero, cause
}

// AtomicInTx is Atomic inside the caller's transaction tx. The work and
// the ledger row are written under a savepoint, so a failed body, or a
// record that a row of the key refused, rolls back to it and leaves tx
// usable; everything commits (or not) with tx. As in Atomic, a first
// attempt does not look the key up: a row the key already has refuses the
// record, the savepoint is rolled back, and the row, read in tx, answers.
// A call that may be a retry (hint.go) looks the key up in tx first. A
// concurrent twin's record waits for tx to end, for at most the claim wait
// (then it gets an *InProgressError). Serialization failures are returned,
// not retried: only the caller can retry its transaction. tx is a pgx.Tx
// on a store made by NewStore (the savepoint travels with the body's first
// statement, RELEASE with the ledger row), or a *sql.Tx on one made by
// NewSQLStore, as in Atomic.
func AtomicInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	d, c, err := openAtomic[R, TTx](ctx, s, m, fingerprint, "AtomicInTx")
	if err != nil {
		return zero, err
	}
	run := func(lookup bool) (R, error) {
		t, btx, bodyEnded := d.inTx(s, c, tx)
		return atomicInTxRun(ctx, s, m, c, t, func(ctx context.Context) (R, error) { return body(ctx, btx) }, bodyEnded, lookup)
	}
	lookup := s.lookupFirst(ctx, c)
	out, err := run(lookup)
	if !lookup && errors.Is(err, errRowVanished) {
		// A record refused by an expired row, which only a record with
		// the fence a lookup saw takes over: at once, with the lookup,
		// under a savepoint of its own.
		out, err = run(true)
	}
	return out, err
}

// atomicInTxRun is AtomicInTx on the caller's transaction that t carries:
// the lookup if lookup is set, then the body under a savepoint and the
// record with RELEASE. Each run adds one call to its method's replay rate
// (hint.go).
func atomicInTxRun[R any](ctx context.Context, s *Store, m *Method[R], c call, t ledgerTx, body func(context.Context) (R, error), bodyEnded func() bool, lookup bool) (R, error) {
	var zero R
	// A replay read in the caller's transaction is confirmed by the
	// caller's COMMIT (replication.go); a mismatch is recorded outside
	// the caller's transaction (mismatch.go).
	confirm := func(ctx context.Context) error { return s.confirmInTx(ctx, t, c) }
	refused := func(r ledgerRow) { s.recordMismatchBehind(ctx, c, r) }

	citus, err := s.onCitus(ctx, t)
	if err != nil {
		return zero, storeErr(c.method, "lookup", err)
	}
	var (
		r     ledgerRow
		found bool
	)
	if lookup {
		if r, found, err = s.readRow(ctx, t, c); err != nil {
			return zero, err
		}
		if answers(r, found) {
			s.replays.observe(c.method, true)
			return answer(ctx, s, m, c, r, confirm, refused)
		}
	}
	// No row, or an expired one the record takes over; or no lookup: the
	// record with fence 0 seen, which any row refuses.
	seen := int64(0)
	if found {
		seen = r.fence
	}
	if err := t.open(ctx); err != nil {
		if t.keyWaitEnded() {
			return lost[R](ctx, s, m, c, t, err, false, confirm, refused)
		}
		return zero, storeErr(c.method, "savepoint", err)
	}
	ended := false
	defer func() { // error paths and panics
		if !ended {
			_ = t.abandon(ctx)
		}
	}()
	out, berr := runBody(ctx, s, c, seen+1, found, body)
	if bodyEnded() {
		return zero, fmt.Errorf("idem: %s: %w", c.method, errBodyEndedTx)
	}
	resp, errName, errMsg, out, err := outcome(m, c, out, berr)
	if err != nil {
		ended = true
		return lost[R](ctx, s, m, c, t, err, false, confirm, refused)
	}
	var putBack string
	if citus {
		// The claim wait's SET LOCAL statements outlive RELEASE: the
		// caller's settings are read now and put back after it.
		if putBack, err = citusPutBack(ctx, t); err != nil {
			return zero, storeErr(c.method, "read lock_timeout", err)
		}
	}
	prelude, stmt, args := s.record(citus, true, c, m.retention(s), seen, resp, errName, errMsg)
	_, err = t.finish(ctx, prelude, stmt, args)
	ended = true
	if err == nil && putBack != "" {
		if _, err := t.Exec(ctx, putBack); err != nil {
			return zero, storeErr(c.method, "put lock_timeout back", err)
		}
	}
	if err != nil {
		if refusedRecord(err) {
			err = errRecordRefused
		} else {
			err = storeErr(c.method, "store response", err)
		}
		s.replays.observe(c.method, errors.Is(err, errRecordRefused))
		return lost[R](ctx, s, m, c, t, err, true, confirm, refused)
	}
	s.replays.observe(c.method, false)
	return out, berr
}

// runBody runs a call's body between its hooks: Claimed (and TakenOver
// when the lookup found the key expired), then Executed with the body's
// duration and error. fence is the one the call's row gets if its record
// wins.
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
