package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// prepareLookup measures the least a replay can cost: one autocommit SELECT
// of the finished row by its primary key, reading the columns a replay
// answers from, over the keys the replay path replays (claimed the same
// way, read in the same order). No claim, no transaction, no decoding.
func prepareLookup(ctx context.Context, db *idemtest.DB, keys int) (op, error) {
	_, n, err := claimReplayKeys(ctx, db, keys)
	if err != nil {
		return nil, err
	}
	l, err := ledger.New(ledger.DefaultTable)
	if err != nil {
		return nil, err
	}
	read := fmt.Sprintf(`SELECT fingerprint, status, response, error_name, error_message
FROM %s WHERE scope = $1 AND method = $2 AND key = $3`, l.Table.Quoted())
	method, fp := chargeMethod().Name, fingerprint()
	return func(ctx context.Context, i int) error {
		var (
			rowFP, resp      []byte
			status           string
			errName, errText *string
		)
		if err := db.Pool.QueryRow(ctx, read, "", method, replayKey(i%n)).Scan(&rowFP, &status, &resp, &errName, &errText); err != nil {
			return fmt.Errorf("lookup: %w", err)
		}
		if status != "done" || !bytes.Equal(rowFP, fp) || len(resp) == 0 {
			return fmt.Errorf("lookup: the row of %s is %s, not a finished row of this request", replayKey(i%n), status)
		}
		return nil
	}, nil
}

// prepareXFloor measures the least external mode's protocol can cost: the
// ledger row goes in before the work and is finished after it, each write a
// statement of its own that commits on its own, and the work runs in a
// transaction of its own in between. Nothing checks whether the key was
// claimed before, nor fences the finishing write: what the wrapper adds on
// top is the price of doing so.
func prepareXFloor(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	l, err := ledger.New(ledger.DefaultTable)
	if err != nil {
		return nil, err
	}
	claim := fmt.Sprintf(`INSERT INTO %s (scope, method, key, fingerprint, status, expires_at, locked_until, intention)
VALUES ('', $1, $2, $3, 'in_progress', now() + $4::bigint * interval '1 microsecond', now() + interval '1 minute', gen_random_uuid())`, l.Table.Quoted())
	finish := fmt.Sprintf(`UPDATE %s SET status = 'done', response = $3, locked_until = NULL
WHERE scope = '' AND method = $1 AND key = $2`, l.Table.Quoted())
	method, fp, ret := chargeMethod().Name, fingerprint(), retention.Microseconds()
	return func(ctx context.Context, i int) error {
		k := key(i)
		if _, err := db.Pool.Exec(ctx, claim, method, k, fp, ret); err != nil {
			return fmt.Errorf("xfloor: claim: %w", err)
		}
		var r Receipt
		if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) (err error) {
			r, err = charge(ctx, tx)
			return err
		}); err != nil {
			return err
		}
		resp, err := json.Marshal(r)
		if err != nil {
			return err
		}
		tag, err := db.Pool.Exec(ctx, finish, method, k, resp)
		if err != nil {
			return fmt.Errorf("xfloor: finish: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("xfloor: finish updated %d rows", tag.RowsAffected())
		}
		return nil
	}, nil
}

// prepareFloor measures the least a ledger row in a table of its own costs
// the claimed path: the work, then one INSERT of the finished row, response
// included, in the round trip of COMMIT. It is not idempotent against
// concurrent twins (both run the work; the second fails at the primary key),
// which is why the wrapper claims first; the difference between the two is
// the price of claiming before the work.
func prepareFloor(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	return ledgerRowOnce(db, func(ctx context.Context, conn *pgxpool.Conn, _ string) error {
		_, err := conn.Exec(ctx, "BEGIN")
		return err
	})
}

// prepareLockFirst is a design the runtime does not use (yet): the claim is a
// transaction-scoped advisory lock on the key's hash, bounded by the claim
// wait as the runtime's claim is, sent with BEGIN and the read of the key's
// row in one round trip; the ledger row, response included, is written once,
// with COMMIT, as in the floor path. Twins queue on the lock instead of on an
// uncommitted row, and the primary key still refuses a second row should
// anything not take the lock.
func prepareLockFirst(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	l, err := ledger.New(ledger.DefaultTable)
	if err != nil {
		return nil, err
	}
	// The claim wait is set by the lock statement and put back by the
	// read, as runtime/idem's claim statement did when the claim came
	// first (its record statement in the caller's transaction still does). The
	// read cannot share the lock's statement: it must start after the lock
	// is granted, to see the row of the holder it waited for.
	const lock = `SELECT pg_advisory_xact_lock(hashtextextended(length($1) || ':' || $1 || length($2) || ':' || $2 || $3, 0))
FROM (SELECT set_config('lock_timeout', $4, true)
      FROM (SELECT set_config('idemgen.lock_timeout', current_setting('lock_timeout'), true) OFFSET 0) AS saved
      OFFSET 0) AS claim_wait`
	read := fmt.Sprintf(`SELECT count(*), set_config('lock_timeout', current_setting('idemgen.lock_timeout'), true)
FROM %s WHERE scope = $1 AND method = $2 AND key = $3`, l.Table.Quoted())
	method := chargeMethod().Name
	return ledgerRowOnce(db, func(ctx context.Context, conn *pgxpool.Conn, k string) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(lock, "", method, k, "5000ms")
		b.Queue(read, "", method, k)
		br := conn.SendBatch(ctx, b)
		var err error
		for range 2 {
			if err == nil {
				_, err = br.Exec()
			}
		}
		if err == nil {
			var rows int
			var restored string
			if err = br.QueryRow().Scan(&rows, &restored); err == nil && rows > 0 {
				err = errors.New("lockfirst: the key is already done")
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// ledgerRowOnce returns an operation that opens its transaction with begin
// (the key is k), runs the work, and writes the whole ledger row, response
// included, with COMMIT in one round trip: the paths whose ledger row is
// written once.
func ledgerRowOnce(db *idemtest.DB, begin func(ctx context.Context, conn *pgxpool.Conn, k string) error) (op, error) {
	l, err := ledger.New(ledger.DefaultTable)
	if err != nil {
		return nil, err
	}
	insert := fmt.Sprintf(`INSERT INTO %s (scope, method, key, fingerprint, status, response, expires_at, intention)
VALUES ('', $1, $2, $3, 'done', $4, now() + $5::bigint * interval '1 microsecond', gen_random_uuid())`, l.Table.Quoted())
	method, fp, ret := chargeMethod().Name, fingerprint(), retention.Microseconds()
	return func(ctx context.Context, i int) error {
		conn, err := db.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		committed := false
		defer func() {
			if !committed {
				_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
		}()
		k := key(i)
		if err := begin(ctx, conn, k); err != nil {
			return err
		}
		r, err := chargeOn(ctx, conn)
		if err != nil {
			return err
		}
		resp, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(insert, method, k, fp, resp, ret)
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		committed = true
		return nil
	}, nil
}
