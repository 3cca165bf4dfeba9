package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// Every path does the same business work, one INSERT of a payment in a
// transaction, so that the differences between them are the cost of
// idempotency. Inline mode's work is the same INSERT into a table that
// carries the key columns.

// paymentsDDL is the work's table.
const paymentsDDL = `CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`

// spellDDL is the essay's table: the key under a unique constraint.
const spellDDL = `CREATE TABLE spell_payments (
    id bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    amount bigint NOT NULL,
    CONSTRAINT spell_payments_key UNIQUE (idempotency_key))`

// Receipt is the response the ledger stores and replays.
type Receipt struct {
	PaymentID int64
	Amount    int64
}

// retention is the methods' retention window.
const retention = 48 * time.Hour

// chargeMethod is the ledger's method: one name for the atomic and external
// paths, each on its own database.
func chargeMethod() *idem.Method[Receipt] {
	return &idem.Method[Receipt]{Name: "github.com/idemgen/idemgen/internal/bench.Payments.Charge", Retention: retention}
}

// fingerprint is the request's fingerprint; every path sends the same request.
func fingerprint() []byte {
	f := idem.NewFingerprinter("Payments.Charge")
	f.Field("amount")
	f.String("100")
	return f.Sum()
}

// queryer is what the work needs of its transaction.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// charge is the work: one payment row, in the transaction it is given.
func charge(ctx context.Context, tx pgx.Tx) (Receipt, error) { return chargeOn(ctx, tx) }

func chargeOn(ctx context.Context, tx queryer) (Receipt, error) {
	r := Receipt{Amount: 100}
	if err := tx.QueryRow(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, r.Amount).Scan(&r.PaymentID); err != nil {
		return Receipt{}, fmt.Errorf("insert payment: %w", err)
	}
	return r, nil
}

// op is the i-th call of a path, from one goroutine. Calls with different
// i use different keys, except on the replay path, whose calls replay keys
// claimed beforehand.
type op func(ctx context.Context, i int) error

// key is the idempotency key of the i-th call.
func key(i int) string { return fmt.Sprintf("key-%d", i) }

// path is one line of the figures: how to set up its database and what one
// operation does.
type path struct {
	name string
	desc string
	// opts are the database's options (tables, ledger or not).
	opts func() ([]idemtest.Option, error)
	// prepare runs once on the database before any operation and returns
	// the operation. keys is how many distinct keys the measured
	// operations will use at most (replay claims them first).
	prepare func(ctx context.Context, db *idemtest.DB, keys int) (op, error)
	// ledger names the table whose HOT updates are reported, "" for none.
	ledger string
}

// allPaths returns every path in the order of the table.
func allPaths() []path {
	return []path{
		{name: "plain", desc: "the work alone (BEGIN, INSERT, COMMIT)", opts: ledgerFree(paymentsDDL), prepare: preparePlain},
		{name: "spell", desc: "the essay's hand-written spell (the INSERT carries the key; 23505, then SELECT)", opts: ledgerFree(spellDDL), prepare: prepareSpell},
		{name: "claimed", desc: "generated wrapper, atomic mode, claimed (a new key)", opts: withLedger(paymentsDDL), prepare: prepareClaimed, ledger: ledger.DefaultTable},
		{name: "replay", desc: "generated wrapper, atomic mode, replay (a finished key) nothing marks a retry: a storm of replays, which the store's replay rate turns to lookups first", opts: withLedger(paymentsDDL), prepare: prepareReplay},
		{name: "retry", desc: "generated wrapper, atomic mode, replay (a finished key) marked a retry (idem.ContextWithRetry): the lookup first", opts: withLedger(paymentsDDL), prepare: prepareRetry},
		{name: "lfclaimed", desc: "generated wrapper, atomic mode, claimed (a new key) on a store made WithLookupFirst: the lookup before the body, the protocol before first attempts skipped it", opts: withLedger(paymentsDDL), prepare: prepareLookupFirstClaimed, ledger: ledger.DefaultTable},
		{name: "external", desc: "generated wrapper, external mode, claimed (the work in its own transaction)", opts: withLedger(paymentsDDL), prepare: prepareExternal, ledger: ledger.DefaultTable},
		{name: "inline-work", desc: "not a wrapper: inline mode's work alone, the payment row carrying a key (BEGIN, INSERT, COMMIT), the bare work inline mode is held to", opts: inlineOpts, prepare: prepareInlineWork},
		{name: "inline", desc: "generated wrapper, inline mode, claimed (the key in the payment row)", opts: inlineOpts, prepare: prepareInline},
		{name: "floor", desc: "not a wrapper: the work, then a whole ledger row (response included) sent with COMMIT; no claim before the work, so twins both run it. The least a separate ledger row can cost", opts: withLedger(paymentsDDL), prepare: prepareFloor, ledger: ledger.DefaultTable},
		{name: "lookup", desc: "not a wrapper: the replay path's floor; one autocommit SELECT of a finished ledger row by its key, the columns a replay needs, over the keys the replay path replays", opts: withLedger(paymentsDDL), prepare: prepareLookup},
		{name: "xfloor", desc: "not a wrapper: external mode's floor; one autocommit INSERT of an in-progress ledger row (no claim logic), the work (BEGIN, INSERT, COMMIT), one autocommit UPDATE finishing the row with the response", opts: withLedger(paymentsDDL), prepare: prepareXFloor, ledger: ledger.DefaultTable},
		{name: "lockfirst", desc: "not a wrapper: a design to weigh; the claim is an advisory lock on the key, sent with BEGIN and the read; the ledger row is written once, with COMMIT", opts: withLedger(paymentsDDL), prepare: prepareLockFirst, ledger: ledger.DefaultTable},
	}
}

func ledgerFree(ddl ...string) func() ([]idemtest.Option, error) {
	return func() ([]idemtest.Option, error) {
		return []idemtest.Option{idemtest.WithoutLedger(), idemtest.WithSetup(ddl...)}, nil
	}
}

func withLedger(ddl ...string) func() ([]idemtest.Option, error) {
	return func() ([]idemtest.Option, error) { return []idemtest.Option{idemtest.WithSetup(ddl...)}, nil }
}

func preparePlain(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	return func(ctx context.Context, _ int) error {
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := charge(ctx, tx)
			return err
		})
	}, nil
}

// spell charges under key k the essay's way: the INSERT carries the key under
// a unique index; a 23505 on that index means the key was used, and a SELECT
// answers from the row.
func spell(ctx context.Context, db *idemtest.DB, k string) (Receipt, error) {
	r := Receipt{Amount: 100}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return Receipt{}, err
	}
	err = tx.QueryRow(ctx, `INSERT INTO spell_payments (idempotency_key, amount) VALUES ($1, $2) RETURNING id`, k, r.Amount).Scan(&r.PaymentID)
	if err == nil {
		return r, tx.Commit(ctx)
	}
	_ = tx.Rollback(ctx)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "spell_payments_key" {
		return Receipt{}, err
	}
	err = db.Pool.QueryRow(ctx, `SELECT id, amount FROM spell_payments WHERE idempotency_key = $1`, k).Scan(&r.PaymentID, &r.Amount)
	return r, err
}

func prepareSpell(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	return func(ctx context.Context, i int) error {
		_, err := spell(ctx, db, key(i))
		return err
	}, nil
}

func prepareClaimed(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	return claimedOn(db)
}

// prepareLookupFirstClaimed is prepareClaimed on a store that looks every
// key up first (idem.WithLookupFirst).
func prepareLookupFirstClaimed(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	return claimedOn(db, idem.WithLookupFirst())
}

// claimedOn is the claimed path on a store over db made with opts.
func claimedOn(db *idemtest.DB, opts ...idem.Option) (op, error) {
	s, err := idem.NewStore(db.Pool, opts...)
	if err != nil {
		return nil, err
	}
	m, fp := chargeMethod(), fingerprint()
	return func(ctx context.Context, i int) error {
		_, err := idem.Atomic(idem.ContextWithKey(ctx, key(i)), s, m, fp, charge)
		return err
	}, nil
}

// replayKeys is the most keys the replay path claims before it is
// measured; the operations replay them in turn.
const replayKeys = 2000

func prepareReplay(ctx context.Context, db *idemtest.DB, keys int) (op, error) {
	return replayOn(ctx, db, keys, false)
}

// prepareRetry is prepareReplay with every call marked a retry.
func prepareRetry(ctx context.Context, db *idemtest.DB, keys int) (op, error) {
	return replayOn(ctx, db, keys, true)
}

// replayOn replays the keys claimReplayKeys claims, each call marked a
// retry (idem.ContextWithRetry) if marked.
func replayOn(ctx context.Context, db *idemtest.DB, keys int, marked bool) (op, error) {
	s, n, err := claimReplayKeys(ctx, db, keys)
	if err != nil {
		return nil, err
	}
	m, fp := chargeMethod(), fingerprint()
	return func(ctx context.Context, i int) error {
		if marked {
			ctx = idem.ContextWithRetry(ctx)
		}
		ctx, out := idem.ContextWithOutcome(idem.ContextWithKey(ctx, replayKey(i%n)))
		if _, err := idem.Atomic(ctx, s, m, fp, charge); err != nil {
			return err
		}
		if !out.Replayed() {
			return errors.New("replay path: the call was not a replay")
		}
		return nil
	}, nil
}

// claimReplayKeys claims, through the wrapper, the keys the replay and
// lookup paths read: replayKey(0) to replayKey(n-1), n being keys capped at
// replayKeys. The i-th call reads replayKey(i%n).
func claimReplayKeys(ctx context.Context, db *idemtest.DB, keys int) (*idem.Store, int, error) {
	s, err := idem.NewStore(db.Pool)
	if err != nil {
		return nil, 0, err
	}
	m, fp := chargeMethod(), fingerprint()
	n := max(1, min(keys, replayKeys))
	for i := range n {
		if _, err := idem.Atomic(idem.ContextWithKey(ctx, replayKey(i)), s, m, fp, charge); err != nil {
			return nil, 0, fmt.Errorf("claim the keys to replay: %w", err)
		}
	}
	return s, n, nil
}

func replayKey(i int) string { return fmt.Sprintf("replay-%d", i) }

func prepareExternal(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	s, err := idem.NewStore(db.Pool)
	if err != nil {
		return nil, err
	}
	m, fp := chargeMethod(), fingerprint()
	return func(ctx context.Context, i int) error {
		_, err := idem.External(idem.ContextWithKey(ctx, key(i)), s, m, fp, func(ctx context.Context) (Receipt, error) {
			var r Receipt
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) (err error) {
				r, err = charge(ctx, tx)
				return err
			})
			return r, err
		})
		return err
	}, nil
}

// inlineTable is the inline path's payments table.
const inlineTable = "inline_payments"

func inlineOpts() ([]idemtest.Option, error) {
	s, err := ledger.NewInline(inlineTable)
	if err != nil {
		return nil, err
	}
	ddl := append([]string{`CREATE TABLE inline_payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`}, s.DDL()...)
	return []idemtest.Option{idemtest.WithoutLedger(), idemtest.WithSetup(ddl...)}, nil
}

// inlineCharge is the inline path's work: the payment row carries the key.
func inlineCharge(ctx context.Context, tx pgx.Tx) (Receipt, error) {
	k, _ := idem.InlineKeyFrom(ctx)
	r := Receipt{Amount: 100}
	err := tx.QueryRow(ctx, `INSERT INTO inline_payments (amount, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4) RETURNING id`, r.Amount, k.Scope, k.Key, k.Fingerprint).Scan(&r.PaymentID)
	if err != nil {
		return Receipt{}, fmt.Errorf("insert payment: %w", err)
	}
	return r, nil
}

// inlineLookup answers a replay from the payment row.
func inlineLookup(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (Receipt, []byte, error) {
	var r Receipt
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id, amount, idempotency_fingerprint FROM inline_payments
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&r.PaymentID, &r.Amount, &fp)
	return r, fp, err
}

func prepareInlineWork(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	fp := fingerprint()
	return func(ctx context.Context, i int) error {
		ctx = idem.ContextWithInlineKey(ctx, idem.InlineKey{Key: key(i), Fingerprint: fp})
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := inlineCharge(ctx, tx)
			return err
		})
	}, nil
}

func prepareInline(_ context.Context, db *idemtest.DB, _ int) (op, error) {
	s, err := idem.NewStore(db.Pool)
	if err != nil {
		return nil, err
	}
	m := &idem.InlineMethod[Receipt]{Name: "Payments.Deposit", Table: inlineTable, Retention: retention}
	fp := fingerprint()
	return func(ctx context.Context, i int) error {
		_, err := idem.Inline(idem.ContextWithKey(ctx, key(i)), s, m, fp, inlineLookup, inlineCharge)
		return err
	}, nil
}
