package idem

import (
	"context"
	"errors"
)

// Inline mode keeps the key in the business row itself: the method's own
// INSERT writes the scope, key and fingerprint (InlineKeyFrom) into columns
// of its table, a partial unique index on (scope, key) makes that INSERT the
// claim, and a lookup method answers retries from the row. There is no second
// table and no second write: the claimed path costs the work's own round trips.

// Inline runs body at most once per (scope, key) in m's table. body runs in
// a transaction and must write InlineKeyFrom(ctx) into the row it inserts:
// that INSERT is the claim.
//
//   - Claimed: the row is written, and a check that it holds the key and the
//     fingerprint travels with COMMIT. A body that returns without having
//     written its key gets ErrKeyNotWritten and everything rolls back.
//   - A concurrent twin's INSERT blocks on the unique index until the first
//     commits, then fails with a unique violation on that index (matched by
//     name; any other violation is the body's own error). The transaction is
//     rolled back and lookup reads the row outside any transaction: the same
//     fingerprint replays the row's response, another is a *MismatchError.
//     A finished key is answered in two round trips.
//   - A key whose retention window has ended is taken off its old row (the
//     row stays) and the request runs as new.
//
// A body error rolls back and is returned; nothing is stored, so a retry runs
// again. Inline mode stores no errors: a final error cannot be replayed from
// the business table. Serialization failures, deadlocks and unknown COMMIT
// outcomes retry the whole transaction, as in Atomic. If the database cannot
// be reached the body does not run (errors.Is(err, ErrStore)).
//
// TTx is the store's driver's transaction, as in Atomic: a pgx.Tx on a
// store made by NewStore, where inline mode's statements travel with the
// body's own and the lost claim is seen on the body's INSERT; or a *sql.Tx on a store made by
// NewSQLStore. database/sql gives no way to watch the body's statements, so
// there the lost claim is seen in the error body returns: return the
// INSERT's error (wrapped is fine). A body that swallows it fails at the
// key check with the transaction's abort instead, and is not replayed. On
// database/sql the lookup runs in a transaction of its own.
func Inline[R, TTx any](ctx context.Context, s *Store, m *InlineMethod[R], fingerprint []byte,
	lookup func(ctx context.Context, tx TTx, k InlineKey) (R, []byte, error), body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	q, c, err := openInline[R, TTx](ctx, s, m, fingerprint, "Inline")
	if err != nil {
		return zero, err
	}
	return retryAttempts(ctx, s, c, func() (R, error) { return inlineAttempt(ctx, s, m, q, c, lookup, body) })
}

// InlineInTx is Inline inside the caller's transaction tx, under a savepoint
// that travels with the body's first statement. A refused claim rolls back to
// the savepoint and the lookup runs in tx, so tx stays usable; everything
// commits (or not) with tx. A concurrent twin waits for tx to end. The lookup
// sees the holder's row only if tx's snapshot allows it (READ COMMITTED, the
// default, does). Serialization failures are returned, not retried: only the
// caller can retry its transaction.
// tx is a pgx.Tx on a store made by NewStore, or a *sql.Tx on one made by
// NewSQLStore, as in Inline; on database/sql, body must return the error of
// the INSERT that claims.
func InlineInTx[R, TTx any](ctx context.Context, s *Store, tx TTx, m *InlineMethod[R], fingerprint []byte,
	lookup func(ctx context.Context, tx TTx, k InlineKey) (R, []byte, error), body func(ctx context.Context, tx TTx) (R, error)) (R, error) {
	var zero R
	for {
		q, c, err := openInline[R, TTx](ctx, s, m, fingerprint, "InlineInTx")
		if err != nil {
			return zero, err
		}
		out, err := inlineInTx(ctx, s, tx, m, q, c, lookup, body)
		if !errors.Is(err, errKeyFreed) {
			return out, err
		}
		// The key had expired and was taken off its old row: claim it
		// once more, still inside tx.
	}
}

// openInline is what Inline and InlineInTx (fn) do before the body runs:
// the driver of TTx checked against s, m's statements, the call's key and
// scope read from ctx, and the caller's Outcome started.
func openInline[R, TTx any](ctx context.Context, s *Store, m *InlineMethod[R], fingerprint []byte, fn string) (*inlineQueries, call, error) {
	if _, err := driverFor[TTx](s, fn); err != nil {
		return nil, call{}, err
	}
	q, err := m.queries()
	if err != nil {
		return nil, call{}, err
	}
	c, err := s.newCall(ctx, m.Name, fingerprint)
	if err != nil {
		return nil, call{}, err
	}
	startOutcome(ctx, m.retention(s))
	return q, c, nil
}
