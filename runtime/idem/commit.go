package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Committing a call: the statement that stores its outcome (atomic mode's
// record, inline mode's check), and COMMIT with it, detached from the
// caller's context. When the call does not commit, the driver rolls back
// (ledgerTx.abandon and attemptTx.done; on pgx, Store.rollback).

// commit sends the prelude's statements, stmt and COMMIT on t, detached
// from ctx: a caller going away must not cancel a COMMIT that waits for a
// synchronous standby (see replication.go). They travel in one round trip
// where t pipelines. stmt refuses the commit by failing (refusedRecord:
// the COMMIT then rolls back): refused is the error for that. what names
// the step in other errors.
func commit(ctx context.Context, s *Store, c call, t attemptTx, prelude []string, stmt string, args []any, what string, refused error) error {
	cctx, cancel := t.commitContext(ctx, s)
	defer cancel()
	pc := t.pgConn()
	takeUnreplicated(pc)
	commitTag, err := t.finish(cctx, prelude, stmt, args)
	if errors.Is(err, errBodyEndedTx) {
		// A *sql.Tx the body committed or rolled back itself.
		return fmt.Errorf("idem: %s: %w", c.method, err)
	}
	if refusedRecord(err) {
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

// outcome is what the record statement stores for the body's answer: the
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

// isDivisionByZero reports the record (or check) statement's refusal to
// store a response on anything but exactly one row.
func isDivisionByZero(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012"
}

// refusedRecord reports the record statement's refusal, as finish
// returns it: the takeover form's division by zero, or the fresh form's
// unique violation (errKeyTaken).
func refusedRecord(err error) bool {
	return isDivisionByZero(err) || errors.Is(err, errKeyTaken)
}

// stmtErr is finish's error for its statement (the record, or inline
// mode's check): a unique violation is marked errKeyTaken.
func stmtErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %w", errKeyTaken, err)
	}
	return err
}
