package idem_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The essay's hand-written spell, measured beside the generated path so that
// every benchstat table carries the ratio: the INSERT carries the key under a
// unique index; a 23505 on that index means the key was used, and a SELECT
// answers from the row.
//
//	go test -run '^$' -bench 'Spell|Plain|Atomic' -count 10 ./runtime/idem | tee new.txt && benchstat new.txt

const spellDDL = `CREATE TABLE spell_payments (
    id bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    amount bigint NOT NULL,
    CONSTRAINT spell_payments_key UNIQUE (idempotency_key))`

// spell charges amount under key the essay's way and returns the payment id.
func spell(ctx context.Context, db *idemtest.DB, key string, amount int64) (int64, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO spell_payments (idempotency_key, amount) VALUES ($1, $2) RETURNING id`, key, amount).Scan(&id)
	if err == nil {
		return id, tx.Commit(ctx)
	}
	_ = tx.Rollback(ctx)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "spell_payments_key" {
		return 0, err
	}
	err = db.Pool.QueryRow(ctx, `SELECT id FROM spell_payments WHERE idempotency_key = $1`, key).Scan(&id)
	return id, err
}

func BenchmarkSpellClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(spellDDL), tc.option())
	ctx := context.Background()
	i := 0
	tc.report(b)
	for b.Loop() {
		i++
		_, err := spell(ctx, db, fmt.Sprintf("key-%d", i), 1)
		require.NoError(b, err)
	}
}

func BenchmarkSpellReplay(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(spellDDL), tc.option())
	ctx := context.Background()
	_, err := spell(ctx, db, "k", 1)
	require.NoError(b, err)
	tc.report(b)
	for b.Loop() {
		_, err := spell(ctx, db, "k", 1)
		require.NoError(b, err)
	}
}

// concurrency is the number of goroutines the Parallel benchmarks run, as
// in the figures the performance targets are stated for.
const concurrency = 16

// parallel runs op from concurrency goroutines, each op with a fresh key.
func parallel(b *testing.B, op func(ctx context.Context, key string) error) {
	b.Helper()
	b.SetParallelism(max(1, concurrency/runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := op(ctx, fmt.Sprintf("key-%d", n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkParallelPlainTransaction(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	tc.report(b)
	parallel(b, func(ctx context.Context, _ string) error {
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := charge(1)(ctx, tx)
			return err
		})
	})
}

func BenchmarkParallelSpellClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(spellDDL), tc.option())
	tc.report(b)
	parallel(b, func(ctx context.Context, key string) error {
		_, err := spell(ctx, db, key, 1)
		return err
	})
}

func BenchmarkParallelAtomicClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := chargeMethod()
	tc.report(b)
	parallel(b, func(ctx context.Context, key string) error {
		_, err := idem.Atomic(idem.ContextWithKey(ctx, key), s, m, fp("1"), charge(1))
		return err
	})
}

func BenchmarkParallelAtomicReplay(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := chargeMethod()
	// Keys finished beforehand, replayed in turn.
	const keys = 1000
	for i := range keys {
		_, err := idem.Atomic(keyed(fmt.Sprintf("key-%d", i)), s, m, fp("1"), charge(1))
		require.NoError(b, err)
	}
	var n atomic.Int64
	tc.report(b)
	parallel(b, func(ctx context.Context, _ string) error {
		_, err := idem.Atomic(idem.ContextWithKey(ctx, fmt.Sprintf("key-%d", n.Add(1)%keys)), s, m, fp("1"), charge(1))
		return err
	})
}
