package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The claim: the statement that decides which call's outcome stands. For
// atomic mode it is the record statement (ledger.Statements.Record), which writes the
// key's row once, with the outcome, before COMMIT (atomic.go); for external
// mode claimExternal (external.go); for inline mode the body's own INSERT
// (inlinetx.go, lostInlineClaim). What they share is here: the claim wait,
// and the read of the key's row.

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
	return scanRow(q.QueryRow(ctx, s.q.Read, s.at(c.scope, c.method, c.key)...), c)
}

// scanRow scans the answer to the read statement.
func scanRow(rw row, c call) (r ledgerRow, found bool, err error) {
	err = rw.Scan(
		&r.fingerprint, &r.status, &r.response, &r.errName, &r.errMsg, &r.fence, &r.intention,
		&r.expired, &r.lockedUntil, &r.now, &r.syncRep)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, storeErr(c.method, "read ledger row", err)
	}
	return r, true, nil
}
