package idem_test

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The runtime serves two kinds of transaction: pgx's (NewStore, Atomic,
// Inline) and database/sql's (NewSQLStore, the same entry points). Tests
// written over a path run the same promise on both.

// stmts is what the tests' work sends its statements on, on either path.
type stmts interface {
	exec(ctx context.Context, query string, args ...any) error
	queryInt(ctx context.Context, query string, args ...any) (int64, error)
}

// callerTx is a caller's own transaction, on either path.
type callerTx interface {
	stmts
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

type pgxStmts struct{ tx pgx.Tx }

func (s pgxStmts) exec(ctx context.Context, query string, args ...any) error {
	_, err := s.tx.Exec(ctx, query, args...)
	return err
}

func (s pgxStmts) queryInt(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.tx.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

func (s pgxStmts) commit(ctx context.Context) error   { return s.tx.Commit(ctx) }
func (s pgxStmts) rollback(ctx context.Context) error { return s.tx.Rollback(ctx) }

type sqlStmts struct{ tx *sql.Tx }

func (s sqlStmts) exec(ctx context.Context, query string, args ...any) error {
	_, err := s.tx.ExecContext(ctx, query, args...)
	return err
}

func (s sqlStmts) queryInt(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.tx.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

func (s sqlStmts) commit(context.Context) error   { return s.tx.Commit() }
func (s sqlStmts) rollback(context.Context) error { return s.tx.Rollback() }

// work is a method body on either path.
type work[R any] func(ctx context.Context, q stmts) (R, error)

// path is one of the two: how to make its store, run its functions and
// begin a caller's transaction.
type path struct {
	name       string
	newStore   func(db *idemtest.DB, opts ...idem.Option) (*idem.Store, error)
	begin      func(ctx context.Context, db *idemtest.DB) (callerTx, error)
	atomic     func(ctx context.Context, s *idem.Store, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error)
	atomicInTx func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error)
	inline     func(ctx context.Context, s *idem.Store, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error)
	inlineInTx func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error)
}

var pgxPath = path{
	name: "pgx",
	newStore: func(db *idemtest.DB, opts ...idem.Option) (*idem.Store, error) {
		return idem.NewStore(db.Pool, opts...)
	},
	begin: func(ctx context.Context, db *idemtest.DB) (callerTx, error) {
		tx, err := db.Pool.Begin(ctx)
		return pgxStmts{tx}, err
	},
	atomic: func(ctx context.Context, s *idem.Store, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error) {
		return idem.Atomic(ctx, s, m, fp, func(ctx context.Context, tx pgx.Tx) (Receipt, error) { return w(ctx, pgxStmts{tx}) })
	},
	atomicInTx: func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error) {
		return idem.AtomicInTx(ctx, s, tx.(pgxStmts).tx, m, fp, func(ctx context.Context, tx pgx.Tx) (Receipt, error) { return w(ctx, pgxStmts{tx}) })
	},
	inline: func(ctx context.Context, s *idem.Store, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error) {
		return idem.Inline(ctx, s, m, fp, orderByKey, func(ctx context.Context, tx pgx.Tx) (Order, error) { return w(ctx, pgxStmts{tx}) })
	},
	inlineInTx: func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error) {
		return idem.InlineInTx(ctx, s, tx.(pgxStmts).tx, m, fp, orderByKey, func(ctx context.Context, tx pgx.Tx) (Order, error) { return w(ctx, pgxStmts{tx}) })
	},
}

var sqlPath = path{
	name: "database/sql",
	newStore: func(db *idemtest.DB, opts ...idem.Option) (*idem.Store, error) {
		return idem.NewSQLStore(db.SQL, opts...)
	},
	begin: func(ctx context.Context, db *idemtest.DB) (callerTx, error) {
		tx, err := db.SQL.BeginTx(ctx, nil)
		return sqlStmts{tx}, err
	},
	atomic: func(ctx context.Context, s *idem.Store, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error) {
		return idem.Atomic(ctx, s, m, fp, func(ctx context.Context, tx *sql.Tx) (Receipt, error) { return w(ctx, sqlStmts{tx}) })
	},
	atomicInTx: func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.Method[Receipt], fp []byte, w work[Receipt]) (Receipt, error) {
		return idem.AtomicInTx(ctx, s, tx.(sqlStmts).tx, m, fp, func(ctx context.Context, tx *sql.Tx) (Receipt, error) { return w(ctx, sqlStmts{tx}) })
	},
	inline: func(ctx context.Context, s *idem.Store, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error) {
		return idem.Inline(ctx, s, m, fp, sqlOrderByKey, func(ctx context.Context, tx *sql.Tx) (Order, error) { return w(ctx, sqlStmts{tx}) })
	},
	inlineInTx: func(ctx context.Context, s *idem.Store, tx callerTx, m *idem.InlineMethod[Order], fp []byte, w work[Order]) (Order, error) {
		return idem.InlineInTx(ctx, s, tx.(sqlStmts).tx, m, fp, sqlOrderByKey, func(ctx context.Context, tx *sql.Tx) (Order, error) { return w(ctx, sqlStmts{tx}) })
	},
}

var paths = []path{pgxPath, sqlPath}

// chargeOn is charge on either path: one payment row.
func chargeOn(amount int64) work[Receipt] {
	return func(ctx context.Context, q stmts) (Receipt, error) {
		id, err := q.queryInt(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, amount)
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{PaymentID: id, Amount: amount, Note: "ok", Tags: []string{"a", "b"}}, nil
	}
}

// createOrderOn is createOrder on either path: one order row carrying the
// key. The INSERT's error is returned (wrapped): that is how a lost claim
// is seen on database/sql.
func createOrderOn(item string, qty int64) work[Order] {
	return func(ctx context.Context, q stmts) (Order, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		id, err := q.queryInt(ctx, `INSERT INTO orders (item, qty, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4, $5) RETURNING id`, item, qty, k.Scope, k.Key, k.Fingerprint)
		if err != nil {
			return Order{}, fmt.Errorf("insert order: %w", err)
		}
		return Order{ID: id, Item: item, Qty: qty}, nil
	}
}

// sqlOrderByKey is orderByKey on database/sql.
func sqlOrderByKey(ctx context.Context, tx *sql.Tx, k idem.InlineKey) (Order, []byte, error) {
	var o Order
	var fp []byte
	err := tx.QueryRowContext(ctx, `SELECT id, item, qty, idempotency_fingerprint FROM orders
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&o.ID, &o.Item, &o.Qty, &fp)
	return o, fp, err
}

// callOn is env.call on path p.
func (e *env) callOn(p path, ctx context.Context, req string, amount int64) result {
	ctx, o := idem.ContextWithOutcome(ctx)
	r, err := p.atomic(ctx, e.store, e.m, fp(req), chargeOn(amount))
	return result{r, err, o.Replayed()}
}
