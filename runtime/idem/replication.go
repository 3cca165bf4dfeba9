package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Synchronous replication and what the runtime does about it.
//
// With synchronous_standby_names set, a COMMIT first writes its commit
// record locally, then waits for the standby to confirm it; only then do
// other sessions see the transaction. If the wait is cut short (a cancel
// request, the backend terminated) PostgreSQL keeps the commit, makes it
// visible, and warns "canceling wait for synchronous replication ... The
// transaction has already committed locally, but might not have been
// replicated to the standby". A failover to that standby then loses it.
//
// So the runtime never cancels a COMMIT that carries a claim or an outcome
// because its caller went away: that COMMIT runs detached from the caller's
// context, bounded by the finalise timeout instead. A COMMIT cut off by that
// timeout, or answered with the warning above (seen through NoticeHandler),
// is reported as ErrOutcomeNotRecorded, never as success.
//
// The row such a COMMIT leaves is visible to a retry on the same primary.
// A retry never replays it as success before the standby has it: atomic
// mode's lookup (or the inline lookup's round trip) also asks whether the
// session's commits wait for a synchronous standby; if they do, before a
// stored outcome is replayed the runtime runs confirmReplication, a
// statement that writes a tiny record to the WAL and commits. That commit's record comes after the commit of
// every row the replay read, and PostgreSQL confirms WAL positions, not
// transactions: once the standby has confirmed it, it has the replayed row
// too. If that confirmation is cut off in turn (the standby is still away),
// the replay is an ErrStore error, which a later retry settles; it is never
// the stored success. On a server without synchronous replication an atomic
// or inline replay sends nothing more (with it, an atomic replay sends the
// confirmation in a round trip of its own, outside any transaction); an external one sends
// ledger.ConfirmIfSyncRepSQL, which writes nothing there.

// unreplicatedFlag is the key, in a connection's CustomData, of the mark
// NoticeHandler leaves when the server warns that a commit may not have
// reached the standby.
const unreplicatedFlag = "idem.unreplicated-commit"

// NoticeHandler returns a pgconn notice handler that lets the runtime see
// PostgreSQL's warning that a COMMIT "has already committed locally, but
// might not have been replicated to the standby" (sent when the wait for a
// synchronous standby is cancelled, by an operator's pg_cancel_backend for
// instance), and then passes every notice on to next (which may be nil).
// Install it on the pool's connections, keeping any handler already set:
//
//	cfg.ConnConfig.OnNotice = idem.NoticeHandler(cfg.ConnConfig.OnNotice)
//
// A COMMIT that ends with the warning is then reported as
// ErrOutcomeNotRecorded instead of success. Without the handler the runtime
// still catches every COMMIT it cut off itself (the finalise timeout); the
// handler adds those cancelled by someone else. The warning is matched by
// its English text: leave lc_messages at C or an English locale.
func NoticeHandler(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		if unreplicatedWarning(n) {
			c.CustomData()[unreplicatedFlag] = true
		}
		if next != nil {
			next(c, n)
		}
	}
}

// unreplicatedWarning reports PostgreSQL's warning that a commit's wait for
// a synchronous standby was cut short (syncrep.c; both the cancel and the
// terminate forms).
func unreplicatedWarning(n *pgconn.Notice) bool {
	return strings.Contains(n.Message, "wait for synchronous replication") ||
		strings.Contains(n.Detail, "might not have been replicated")
}

// takeUnreplicated reports, and clears, the mark NoticeHandler left on c.
func takeUnreplicated(c *pgconn.PgConn) bool {
	d := c.CustomData()
	_, ok := d[unreplicatedFlag]
	delete(d, unreplicatedFlag)
	return ok
}

// commitContext is the context of a COMMIT that carries a claim or an
// outcome: the caller's context ending does not cancel it (that would cut
// a commit waiting for a synchronous standby short, and leave it committed
// but unreplicated); the finalise timeout after that does.
func (s *Store) commitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(s.cfg.finalise, func() {
			cancel(fmt.Errorf("the finalise timeout (%s) ran out after the caller's context ended", s.cfg.finalise))
		})
	})
	return cctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}

// errUnconfirmed is why a commit is not known to have reached the standby.
var errUnconfirmed = errors.New("the commit is not known to have reached the standby")

// unconfirmed returns a non-nil error when the COMMIT just sent on c under
// cctx (see commitContext) may be committed without having been
// replicated: cctx ended while it was in flight (the finalise timeout cut
// it off), or the server warned.
func (s *Store) unconfirmed(cctx context.Context, c *pgconn.PgConn) error {
	warned := takeUnreplicated(c)
	switch {
	case cctx.Err() != nil:
		return fmt.Errorf("%w: cut off while it was in flight: %w", errUnconfirmed, context.Cause(cctx))
	case warned:
		return fmt.Errorf("%w: the server warned that it committed locally but might not have replicated it", errUnconfirmed)
	}
	return nil
}

// outcomeUnknown is the caller's answer to a COMMIT that carried the work or
// its outcome and is not known to have been replicated: the outcome is not
// known (ErrOutcomeNotRecorded), and, unlike a stored unknown outcome, a
// retry under the same key settles it (ErrStore), so idemhttp answers 503.
func outcomeUnknown(c call, cause error) error {
	return fmt.Errorf("%w: %s: key %q: %w: %w", ErrStore, c.method, c.key, ErrOutcomeNotRecorded, cause)
}

// confirmReplication makes sure that every row committed before it is on
// the synchronous standby, before a stored outcome is replayed (see the
// comment at the top of this file); ifSync leaves that to the server: it
// confirms only when the session's commits wait for a standby. prefix
// (ROLLBACK, or "") ends the connection's open transaction in the same
// round trip. It is bounded by ctx and the finalise timeout, and returns an
// ErrStore error when the confirmation did not come.
func (s *Store) confirmReplication(ctx context.Context, conn stmts, pc *pgconn.PgConn, c call, prefix string, ifSync bool) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.finalise)
	defer cancel()
	takeUnreplicated(pc)
	sql := ledger.ConfirmReplicationSQL
	if ifSync {
		sql = ledger.ConfirmIfSyncRepSQL
	}
	if prefix != "" {
		sql = prefix + "; " + sql
	}
	// A multi-statement string goes out as one simple-protocol query; the
	// statement after ROLLBACK is its own implicit transaction.
	_, err := conn.Exec(cctx, sql)
	if uerr := s.unconfirmed(cctx, pc); uerr != nil && (err == nil || cctx.Err() != nil) {
		err = uerr
	}
	if err != nil {
		return storeErr(c.method, "confirm the stored outcome reached the synchronous standby before replaying it", err)
	}
	return nil
}

// confirmInTx writes ledger.ConfirmReplicationSQL's record in the caller's
// transaction, whose commit waits for a synchronous standby, so that the
// caller's COMMIT confirms the row a replay read inside it (AtomicInTx,
// InlineInTx).
func (s *Store) confirmInTx(ctx context.Context, conn stmts, c call) error {
	if _, err := conn.Exec(ctx, ledger.ConfirmReplicationSQL); err != nil {
		return storeErr(c.method, "tie the replayed outcome to the caller's commit", err)
	}
	return nil
}

// committing runs fn, one autocommit statement that carries a claim or an
// outcome, under cctx (see commitContext), on a connection acquired under
// ctx. It returns an error wrapping errUnconfirmed when the statement's
// commit may not have reached a synchronous standby.
func (s *Store) committing(ctx, cctx context.Context, fn func(q stmts) error) error {
	return s.exec.withConn(ctx, func(q stmts, pc *pgconn.PgConn) error {
		takeUnreplicated(pc)
		err := fn(q)
		if uerr := s.unconfirmed(cctx, pc); uerr != nil {
			return uerr
		}
		return err
	})
}

// execCommitting is committing for a statement that returns no rows.
func (s *Store) execCommitting(cctx context.Context, sql string, args ...any) (cmdTag, error) {
	var tag cmdTag
	err := s.committing(cctx, cctx, func(q stmts) error {
		var err error
		tag, err = q.Exec(cctx, sql, args...)
		return err
	})
	return tag, err
}
