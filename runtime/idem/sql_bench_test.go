package idem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkPaths does the same work (one INSERT) on the pgx path and on
// the database/sql path, so that benchstat sets them side by side: a new
// key each time (claimed), the same key (replay), and a new key inside the
// caller's transaction (in_tx: the caller's BEGIN and COMMIT included).
//
//	go test -run '^$' -bench Paths -count 10 ./runtime/idem | tee paths.txt && benchstat -col /path paths.txt
func BenchmarkPaths(b *testing.B) {
	for _, p := range []struct {
		name string
		path
	}{{"pgx", pgxPath}, {"sql", sqlPath}} {
		b.Run("path="+p.name, func(b *testing.B) { benchmarkPath(b, p.path) })
	}
}

func benchmarkPath(b *testing.B, p path) {
	setup := func(b *testing.B) (*env, *tripCounter) {
		var tc tripCounter
		db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
		s, err := p.newStore(db)
		require.NoError(b, err)
		return &env{db: db, store: s, m: chargeMethod()}, &tc
	}
	b.Run("op=claimed", func(b *testing.B) {
		e, tc := setup(b)
		i := 0
		tc.report(b)
		for b.Loop() {
			i++
			require.NoError(b, e.callOn(p, keyed(fmt.Sprintf("key-%d", i)), "1", 1).err)
		}
	})
	b.Run("op=replay", func(b *testing.B) {
		e, tc := setup(b)
		require.NoError(b, e.callOn(p, keyed("k"), "1", 1).err)
		tc.report(b)
		for b.Loop() {
			require.NoError(b, e.callOn(p, keyed("k"), "1", 1).err)
		}
	})
	b.Run("op=in_tx", func(b *testing.B) {
		e, tc := setup(b)
		ctx := context.Background()
		i := 0
		tc.report(b)
		for b.Loop() {
			i++
			tx, err := p.begin(ctx, e.db)
			require.NoError(b, err)
			_, err = p.atomicInTx(keyed(fmt.Sprintf("key-%d", i)), e.store, tx, e.m, fp("1"), chargeOn(1))
			require.NoError(b, err)
			require.NoError(b, tx.commit(ctx))
		}
	})
}
