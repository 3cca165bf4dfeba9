package faults

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// paymentsDDL is the business table of the atomic method: one row per effect.
const paymentsDDL = `CREATE TABLE payments (
	id     bigserial PRIMARY KEY,
	scope  text   NOT NULL,
	key    text   NOT NULL,
	memo   text   NOT NULL,
	amount bigint NOT NULL
)`

// scope is the tenant every scenario's calls belong to.
const scope = "tenant-1"

// request is what a caller sends: Memo names the intention, so an effect can
// be traced back to the request that caused it.
type request struct {
	Memo   string
	Amount int64
}

// receipt is the atomic method's response: the payments row it wrote.
type receipt struct {
	ID     int64
	Key    string
	Memo   string
	Amount int64
}

// payout is the external method's response: the bank transfer it made.
type payout struct {
	TransferID string
	Memo       string
	Amount     int64
}

// transfer is one movement of money at the fake bank.
type transfer struct {
	ID     string
	Key    string // the idempotency key the bank was given (idem.DownstreamKey)
	Memo   string
	Amount int64
}

// transferer is the bank as the external method sees it: in process, or over
// HTTP from a worker process.
type transferer interface {
	Transfer(ctx context.Context, key, memo string, amount int64) (transfer, error)
}

// bank is a fake third party that, like real payment providers, deduplicates
// by the idempotency key its callers send: a repeated key returns the first
// transfer and moves no money. It counts calls and transfers per key.
type bank struct {
	mu        sync.Mutex
	transfers map[string]transfer // by downstream key
	calls     map[string]int      // by downstream key
	// before, if set, runs at the start of every call (outside the lock); a
	// scenario uses it to act while a call is at the bank, or to fail it.
	before func(ctx context.Context, key string) error
}

func newBank() *bank {
	return &bank{transfers: map[string]transfer{}, calls: map[string]int{}}
}

// Transfer moves amount once per key and returns the transfer.
func (b *bank) Transfer(ctx context.Context, key, memo string, amount int64) (transfer, error) {
	if b.before != nil {
		if err := b.before(ctx, key); err != nil {
			return transfer{}, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[key]++
	if t, ok := b.transfers[key]; ok {
		return t, nil
	}
	t := transfer{ID: fmt.Sprintf("tr_%06d", len(b.transfers)+1), Key: key, Memo: memo, Amount: amount}
	b.transfers[key] = t
	return t, nil
}

// snapshot returns every transfer, ordered by id, and the number of calls.
func (b *bank) snapshot() ([]transfer, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ts []transfer
	calls := 0
	for _, t := range b.transfers {
		ts = append(ts, t)
	}
	for _, n := range b.calls {
		calls += n
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	return ts, calls
}

// service is the system under test: an atomic, an external and an inline
// method, written the way generated wrappers call the runtime: for methods
// taking a pgx.Tx (idem.Atomic, idem.Inline), or with sql set, for methods
// taking a *sql.Tx (idem.Atomic, idem.Inline) on a store made by
// idem.NewSQLStore. The external method needs no transaction: it is the
// same on both.
type service struct {
	sql    bool
	store  *idem.Store
	bank   transferer
	charge *idem.Method[receipt]
	payout *idem.Method[payout]
	order  *idem.InlineMethod[receipt]
}

// The methods' names in the ledger.
const (
	chargeName = "faults.Service.Charge"
	payoutName = "faults.Service.Payout"
	orderName  = "faults.Service.Order"
)

func newService(store *idem.Store, b transferer) *service {
	return &service{
		store:  store,
		bank:   b,
		charge: &idem.Method[receipt]{Name: chargeName},
		payout: &idem.Method[payout]{Name: payoutName},
		order:  &idem.InlineMethod[receipt]{Name: orderName, Table: "payments"},
	}
}

// inlineDDL adds inline mode's key columns and unique index to the payments
// table: the inline method's rows carry their key, the atomic method's rows
// leave the columns NULL.
func inlineDDL(t *testing.T) []string {
	t.Helper()
	l, err := ledger.NewInline("payments")
	require.NoError(t, err)
	return l.DDL()
}

// paymentByKey is the inline method's lookup: the row stored under the key,
// with the fingerprint written with it.
func paymentByKey(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (receipt, []byte, error) {
	var r receipt
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id, key, memo, amount, idempotency_fingerprint FROM payments
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&r.ID, &r.Key, &r.Memo, &r.Amount, &fp)
	return r, fp, err
}

// paymentByKeySQL is paymentByKey on database/sql.
func paymentByKeySQL(ctx context.Context, tx *sql.Tx, k idem.InlineKey) (receipt, []byte, error) {
	var r receipt
	var fp []byte
	err := tx.QueryRowContext(ctx, `SELECT id, key, memo, amount, idempotency_fingerprint FROM payments
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&r.ID, &r.Key, &r.Memo, &r.Amount, &fp)
	return r, fp, err
}

// fingerprint hashes a request the way generated fingerprint functions do.
func fingerprint(method string, req request) []byte {
	f := idem.NewFingerprinter(method)
	f.Field("Memo")
	f.String(req.Memo)
	f.Field("Amount")
	f.Int(req.Amount)
	return f.Sum()
}

// insertPayment is the atomic method's insert, on either path.
const insertPayment = `INSERT INTO payments (scope, key, memo, amount) VALUES ($1, $2, $3, $4) RETURNING id`

// insertOrder is the inline method's insert: the row carries its key.
const insertOrder = `INSERT INTO payments (scope, key, memo, amount, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`

// Charge writes one payments row, atomically with the key's ledger row.
func (s *service) Charge(ctx context.Context, req request) (receipt, error) {
	if s.sql {
		return idem.Atomic(ctx, s.store, s.charge, fingerprint(s.charge.Name, req), func(ctx context.Context, tx *sql.Tx) (receipt, error) {
			key, _ := idem.KeyFrom(ctx)
			r := receipt{Key: key, Memo: req.Memo, Amount: req.Amount}
			if err := tx.QueryRowContext(ctx, insertPayment, idem.ScopeFrom(ctx), key, req.Memo, req.Amount).Scan(&r.ID); err != nil {
				return receipt{}, fmt.Errorf("insert payment: %w", err)
			}
			return r, nil
		})
	}
	return idem.Atomic(ctx, s.store, s.charge, fingerprint(s.charge.Name, req), func(ctx context.Context, tx pgx.Tx) (receipt, error) {
		key, _ := idem.KeyFrom(ctx)
		r := receipt{Key: key, Memo: req.Memo, Amount: req.Amount}
		err := tx.QueryRow(ctx, insertPayment, idem.ScopeFrom(ctx), key, req.Memo, req.Amount).Scan(&r.ID)
		if err != nil {
			return receipt{}, fmt.Errorf("insert payment: %w", err)
		}
		return r, nil
	})
}

// Order writes one payments row carrying its key (inline mode): the row's
// INSERT is the claim.
func (s *service) Order(ctx context.Context, req request) (receipt, error) {
	if s.sql {
		return idem.Inline(ctx, s.store, s.order, fingerprint(s.order.Name, req), paymentByKeySQL, func(ctx context.Context, tx *sql.Tx) (receipt, error) {
			k, _ := idem.InlineKeyFrom(ctx)
			r := receipt{Key: k.Key, Memo: req.Memo, Amount: req.Amount}
			err := tx.QueryRowContext(ctx, insertOrder, k.Scope, k.Key, req.Memo, req.Amount, k.Scope, k.Key, k.Fingerprint).Scan(&r.ID)
			if err != nil {
				return receipt{}, fmt.Errorf("insert payment: %w", err)
			}
			return r, nil
		})
	}
	return idem.Inline(ctx, s.store, s.order, fingerprint(s.order.Name, req), paymentByKey, func(ctx context.Context, tx pgx.Tx) (receipt, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		r := receipt{Key: k.Key, Memo: req.Memo, Amount: req.Amount}
		err := tx.QueryRow(ctx, insertOrder, k.Scope, k.Key, req.Memo, req.Amount, k.Scope, k.Key, k.Fingerprint).Scan(&r.ID)
		if err != nil {
			return receipt{}, fmt.Errorf("insert payment: %w", err)
		}
		return r, nil
	})
}

// Payout moves money at the bank: a recorded step whose call carries a
// downstream idempotency key, so a takeover never moves it twice.
func (s *service) Payout(ctx context.Context, req request) (payout, error) {
	return idem.External(ctx, s.store, s.payout, fingerprint(s.payout.Name, req), func(ctx context.Context) (payout, error) {
		t, err := idem.Step(ctx, "transfer", func(ctx context.Context) (transfer, error) {
			return s.bank.Transfer(ctx, idem.DownstreamKey(ctx, "transfer"), req.Memo, req.Amount)
		})
		if err != nil {
			return payout{}, fmt.Errorf("bank transfer: %w", err)
		}
		return payout{TransferID: t.ID, Memo: t.Memo, Amount: t.Amount}, nil
	})
}
