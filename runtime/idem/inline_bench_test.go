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

func BenchmarkInlinePlainTransaction(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithoutLedger(), idemtest.WithSetup(ordersDDL(b)...), tc.option())
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
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := ordersMethod()
	tc.report(b)
	parallel(b, func(ctx context.Context, key string) error {
		_, err := idem.Inline(idem.ContextWithKey(ctx, key), s, m, fp("book"), orderByKey, createOrder("book", 1))
		return err
	})
}
