package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The ledger records the last mismatch on a key: when a request with the key
// was refused for another fingerprint, and that fingerprint (the row's
// mismatch_at and mismatch_fingerprint columns), so that an operator asked
// about a 422 can see it beside the stored fingerprint (idemledger inspect).
//
// It is one write, on the mismatch path only; the claim and the replay
// write nothing more. It never joins a transaction the caller owns, so it
// can neither break one nor vanish with its rollback:
//
//   - Atomic, and External: the refusal read the row outside any
//     transaction; the record is one statement of its own, on the same
//     connection, before the answer.
//   - AtomicInTx and AtomicSQLInTx: the refusal read the row in the
//     caller's transaction, which the record stays out of (the caller
//     probably rolls it back on the error). It is written on another
//     connection of the store's, after the answer, in the background, at
//     most maxRecording at once (past that, a refusal is logged and not
//     recorded): the caller's transaction may hold the pool's last
//     connection until it ends.
//
// A record that fails changes no answer: the caller gets the
// *MismatchError all the same, and the failure is logged (on a ledger
// migrated by an earlier idemgen, which lacks the two columns, the log says
// which migration adds them).

// mismatched reports whether r holds another request than c's.
func mismatched(r ledgerRow, c call) bool {
	return string(r.fingerprint) != string(c.fp)
}

// mismatchArgs are the mismatch statement's arguments for c refused by r.
func (s *Store) mismatchArgs(c call, r ledgerRow) []any {
	return s.at(c.scope, c.method, c.key, r.fence, r.intention, c.fp)
}

// mismatchStmt is the mismatch statement for the store's server, asking
// on q whether it runs Citus if the store does not know yet (a failure to
// ask picks the statement of one server, whose failure is then logged).
func (s *Store) mismatchStmt(ctx context.Context, q stmts) string {
	if citus, _ := s.onCitus(ctx, q); citus {
		return s.q.MismatchCitus
	}
	return s.q.Mismatch
}

// recordMismatchOn records c's refusal in a statement of its own on q,
// outside any transaction: an atomic attempt's connection, after its
// lookup.
func (s *Store) recordMismatchOn(ctx context.Context, q stmts, c call, r ledgerRow) {
	_, err := q.Exec(ctx, s.mismatchStmt(ctx, q), s.mismatchArgs(c, r)...)
	s.mismatchNotRecorded(ctx, c, err)
}

// recordMismatch records c's refusal in a statement of its own on the
// store's executor.
func (s *Store) recordMismatch(ctx context.Context, c call, r ledgerRow) {
	s.recordMismatchOn(ctx, s.exec, c, r)
}

// recordMismatchBehind records c's refusal on another connection, after
// the answer, bounded by the finalise timeout: the caller's transaction
// stays out of it.
func (s *Store) recordMismatchBehind(ctx context.Context, c call, r ledgerRow) {
	select {
	case s.recording <- struct{}{}:
	default:
		s.cfg.logger.WarnContext(ctx, "idempotency mismatch not recorded in the ledger: other records are under way",
			"method", c.method, "scope", c.scope, "key", c.key, "under_way", maxRecording)
		return
	}
	s.records.Add(1)
	go func() {
		defer func() { <-s.recording; s.records.Done() }()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.finalise)
		defer cancel()
		s.recordMismatch(rctx, c, r)
	}()
}

// mismatchNotRecorded logs a record that failed (err not nil).
func (s *Store) mismatchNotRecorded(ctx context.Context, c call, err error) {
	if err == nil {
		return
	}
	msg := "idempotency mismatch not recorded in the ledger (the caller got ErrMismatch all the same)"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42703" {
		msg = "idempotency mismatch not recorded: the ledger " + s.ledger.Table.String() +
			" has no mismatch_at, mismatch_fingerprint columns; apply the migration idemgen generates for them (go generate, then your migration tool)"
	}
	s.cfg.logger.WarnContext(ctx, msg, "method", c.method, "scope", c.scope, "key", c.key, "err", err)
}

// Drain waits until the mismatch records the store writes after their
// answer (AtomicInTx's and AtomicSQLInTx's, in the background) have ended,
// or ctx is done. Call it on shutdown, after the last call has returned and
// before the pool is closed, so that no refusal goes unrecorded; a test
// calls it before reading a record. Records started while it waits are
// waited for too.
func (s *Store) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.records.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("idem: drain the mismatch records under way: %w", context.Cause(ctx))
	}
}
