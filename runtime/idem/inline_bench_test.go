package idem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The inline-mode benchmarks do the same work as each other (one INSERT of an
// order carrying its key, in a transaction), so benchstat shows what inline
// mode costs over the bare work:
//
//	go test -run '^$' -bench 'Inline' -count 10 ./runtime/idem | tee inline.txt && benchstat inline.txt
//
// Each starts from a table in service (inServiceOrders), not an empty one.

// inServiceOrders fills the orders table with keyed rows and analyzes it, as
// a table in service is. On a table that grows from empty, PostgreSQL keeps
// the generic plan it made for a prepared statement while the table was tiny
// (a sequential scan) until the table is next analyzed: a transient of a
// minute or so in production (autovacuum's first analyze), but the whole of
// a benchmark, which would then measure scans of a growing table.
func inServiceOrders(b *testing.B, db *idemtest.DB) {
	b.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO orders (item, qty, idempotency_scope, idempotency_key, idempotency_fingerprint)
SELECT 'earlier', 1, '', 'earlier-' || i, '\x00'::bytea FROM generate_series(1, 10000) AS i;
ANALYZE orders`)
	require.NoError(b, err)
}

func BenchmarkInlinePlainTransaction(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(b)...), tc.option())
	inServiceOrders(b, db)
	ctx := context.Background()
	i := 0
	tc.report(b)
	for b.Loop() {
		i++
		tx, err := db.Pool.Begin(ctx)
		require.NoError(b, err)
		_, err = insertOrder(ctx, tx, idem.InlineKey{Key: fmt.Sprintf("key-%d", i), Fingerprint: fp("book")}, "book", 1)
		require.NoError(b, err)
		require.NoError(b, tx.Commit(ctx))
	}
}

func BenchmarkInlineClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(b)...), tc.option())
	inServiceOrders(b, db)
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := ordersMethod()
	i := 0
	tc.report(b)
	for b.Loop() {
		i++
		_, err := idem.Inline(keyed(fmt.Sprintf("key-%d", i)), s, m, fp("book"), orderByKey, createOrder("book", 1))
		require.NoError(b, err)
	}
}

func BenchmarkInlineReplay(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(b)...), tc.option())
	inServiceOrders(b, db)
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := ordersMethod()
	_, err = idem.Inline(keyed("k"), s, m, fp("book"), orderByKey, createOrder("book", 1))
	require.NoError(b, err)
	tc.report(b)
	for b.Loop() {
		_, err := idem.Inline(keyed("k"), s, m, fp("book"), orderByKey, createOrder("book", 1))
		require.NoError(b, err)
	}
}

func BenchmarkParallelInlineClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(b)...), tc.option())
	inServiceOrders(b, db)
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := ordersMethod()
	tc.report(b)
	parallel(b, func(ctx context.Context, key string) error {
		_, err := idem.Inline(idem.ContextWithKey(ctx, key), s, m, fp("book"), orderByKey, createOrder("book", 1))
		return err
	})
}
