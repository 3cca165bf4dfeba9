package idem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// The three benchmarks do the same work (one INSERT in a transaction) so
// that benchstat shows the cost of idempotency:
//
//	go test -run '^$' -bench . -count 10 ./runtime/idem | tee new.txt && benchstat new.txt

func BenchmarkPlainTransaction(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	ctx := context.Background()
	tc.report(b)
	for b.Loop() {
		tx, err := db.Pool.Begin(ctx)
		require.NoError(b, err)
		_, err = charge(1)(ctx, tx)
		require.NoError(b, err)
		require.NoError(b, tx.Commit(ctx))
	}
}

func BenchmarkAtomicClaimed(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := chargeMethod()
	i := 0
	tc.report(b)
	for b.Loop() {
		i++
		_, err := idem.Atomic(keyed(fmt.Sprintf("key-%d", i)), s, m, fp("1"), charge(1))
		require.NoError(b, err)
	}
}

func BenchmarkAtomicReplay(b *testing.B) {
	var tc tripCounter
	db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
	s, err := idem.NewStore(db.Pool)
	require.NoError(b, err)
	m := chargeMethod()
	_, err = idem.Atomic(keyed("k"), s, m, fp("1"), charge(1))
	require.NoError(b, err)
	tc.report(b)
	for b.Loop() {
		_, err := idem.Atomic(keyed("k"), s, m, fp("1"), charge(1))
		require.NoError(b, err)
	}
}
