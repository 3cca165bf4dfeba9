package idem

import (
	"context"
	"database/sql"
)

// AtomicSQL is Atomic for services on database/sql: s must come from
// NewSQLStore, and body runs in a *sql.Tx on one of the store's
// connections. The guarantees are Atomic's, from the same protocol: the
// claim, the work and the stored response commit in one transaction or not
// at all; a retry gets the stored response or stored final error; a twin
// waits within the claim wait, then replays (or gets an *InProgressError);
// a key reused with another fingerprint is a *MismatchError; serialization
// failures and deadlocks retry the whole transaction; a replay of a row
// whose commit waited for a synchronous standby is confirmed first.
//
// database/sql sends one statement at a time, so the transaction costs more
// round trips than Atomic's (BEGIN, the claim, the response and COMMIT each
// travel alone; see docs/sql.md). body must not commit or roll back tx
// (return an error to roll back): database/sql cannot stop it, and AtomicSQL
// then returns an error wrapping the refusal, but what the body committed
// stays committed.
func AtomicSQL[R any](ctx context.Context, s *Store, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	var zero R
	if err := s.needDB("AtomicSQL", "Atomic"); err != nil {
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
		t, err := newSQLAttempt(ctx, s, c)
		if err != nil {
			return zero, err
		}
		return atomicRun(ctx, s, m, c, t, func(ctx context.Context) (R, error) { return body(ctx, t.tx) }, func() bool { return false })
	})
}

// AtomicSQLInTx is AtomicInTx for services on database/sql: the claim, the
// work and the response are written under a savepoint in the caller's tx,
// which stays usable after a refused claim or a failed body; everything
// commits (or not) with tx. s must come from NewSQLStore. Serialization
// failures are returned, not retried: only the caller can retry its
// transaction.
func AtomicSQLInTx[R any](ctx context.Context, s *Store, tx *sql.Tx, m *Method[R], fingerprint []byte, body func(ctx context.Context, tx *sql.Tx) (R, error)) (R, error) {
	var zero R
	if err := s.needDB("AtomicSQLInTx", "AtomicInTx"); err != nil {
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
	return atomicInTxRun(ctx, s, m, c, sqlInTx{sqlStmts{tx: tx}}, func(ctx context.Context) (R, error) { return body(ctx, tx) })
}
