package shop

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idemgen/idemgen/runtime/idem"
	"shop/db"
)

type Shop struct{}

type Order struct{ ID int64 }

const insertPayment = `INSERT INTO payments (account, amount_cents) VALUES ($1, $2) RETURNING id`

// Pay inserts its row but forgets the key.
//
//go:generate go tool idemgen -inline=payments -lookup=PayByKey
func (s *Shop) Pay(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Pay:"1 SQL statements" `Pay is inline \(-inline=payments\), but none of its SQL that writes payments sets payments.idempotency_key: that INSERT is the claim, so every call fails with idem.ErrKeyNotWritten; write idem.InlineKeyFrom\(ctx\)'s Scope, Key and Fingerprint into idempotency_scope, idempotency_key and idempotency_fingerprint in the INSERT`
	var o Order
	err := tx.QueryRowContext(ctx, insertPayment, "acct", amount).Scan(&o.ID)
	return o, err
}

// Deposit writes the key: not reported.
//
//go:generate go tool idemgen -inline=public.payments -lookup=PayByKey
func (s *Shop) Deposit(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Deposit:"2 SQL statements"
	k, _ := idem.InlineKeyFrom(ctx)
	var o Order
	err := tx.QueryRowContext(ctx, `INSERT INTO public.payments (account, amount_cents, idempotency_scope, idempotency_key, idempotency_fingerprint)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`, "acct", amount, k.Scope, k.Key, k.Fingerprint).Scan(&o.ID)
	if err != nil {
		return o, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE balances SET cents = cents + $1`, amount)
	return o, err
}

// Order goes through sqlc's query that forgets the key.
//
//go:generate go tool idemgen -inline=orders -lookup=PayByKey
func (s *Shop) Order(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Order:"1 SQL statements" `Order is inline \(-inline=orders\), but none of its SQL that writes orders sets orders.idempotency_key`
	id, err := db.New(tx).CreateOrder(ctx, "c", amount)
	return Order{ID: id}, err
}

// KeyedOrder goes through sqlc's query that writes the key, via a helper.
//
//go:generate go tool idemgen -inline=orders -lookup=PayByKey
func (s *Shop) KeyedOrder(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want KeyedOrder:"1 SQL statements"
	return s.create(ctx, tx, amount)
}

func (s *Shop) create(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want create:"1 SQL statements"
	k, _ := idem.InlineKeyFrom(ctx)
	id, err := db.New(tx).CreateKeyedOrder(ctx, "c", amount, k.Scope, k.Key, k.Fingerprint)
	return Order{ID: id}, err
}

// Dynamic builds its SQL at run time: it cannot be read, so it is not judged.
//
//go:generate go tool idemgen -inline=payments -lookup=PayByKey
func (s *Shop) Dynamic(ctx context.Context, tx *sql.Tx, table string, amount int64) (Order, error) {
	var o Order
	err := tx.QueryRowContext(ctx, fmt.Sprintf("INSERT INTO %s (amount_cents) VALUES ($1) RETURNING id", table), amount).Scan(&o.ID)
	return o, err
}

// Ledger is not inline: its INSERT needs no key column.
//
//go:generate go tool idemgen
func (s *Shop) Ledger(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Ledger:"1 SQL statements"
	var o Order
	err := tx.QueryRowContext(ctx, insertPayment, "acct", amount).Scan(&o.ID)
	return o, err
}

// Other writes only another table than its own: not judged.
//
//go:generate go tool idemgen -inline=refunds -lookup=PayByKey
func (s *Shop) Other(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Other:"1 SQL statements"
	_, err := tx.ExecContext(ctx, `UPDATE balances SET cents = cents - $1`, amount)
	return Order{}, err
}

// PayByKey reads the row back.
func (s *Shop) PayByKey(ctx context.Context, tx *sql.Tx, k idem.InlineKey) (Order, []byte, error) { // want PayByKey:"1 SQL statements"
	var o Order
	var fp []byte
	err := tx.QueryRowContext(ctx, `SELECT id, idempotency_fingerprint FROM payments WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&o.ID, &fp)
	return o, fp, err
}

// Batch is a pgx-style batch whose Queue takes SQL.
type Batch struct{}

// Queue queues a statement.
func (b *Batch) Queue(query string, args ...any) {}

// Queued queues its INSERT in a batch, without the key.
//
//go:generate go tool idemgen -inline=Payments -lookup=PayByKey
func (s *Shop) Queued(ctx context.Context, tx *sql.Tx, amount int64) (Order, error) { // want Queued:"1 SQL statements" `Queued is inline \(-inline=Payments\), but none of its SQL that writes Payments sets Payments.idempotency_key`
	var b Batch
	b.Queue(`insert into PAYMENTS (account) values ($1)`, "a")
	return Order{}, nil
}
