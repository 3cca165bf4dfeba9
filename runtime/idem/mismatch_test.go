package idem_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// lastMismatch reads the key's row: its fingerprint, the last mismatch
// recorded on it (nil, nil when none) and its xmin (which changes whenever
// the row is written).
func lastMismatch(t *testing.T, db *idemtest.DB, method, key string) (stored []byte, at *time.Time, got []byte, xmin string) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(), `SELECT fingerprint, mismatch_at, mismatch_fingerprint, xmin::text FROM idempotency_keys
WHERE scope = '' AND method = $1 AND key = $2`, method, key).Scan(&stored, &at, &got, &xmin)
	require.NoError(t, err)
	return stored, at, got, xmin
}

// A refusal is recorded on the key's row, in one write; the claim and the
// replay write nothing for it.
func TestMismatchRecorded(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			require.NoError(t, e.callOn(p, retried("k"), "100", 100).err)
			_, at, got, xmin := lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Nil(t, at, "nothing recorded by the claim")
			assert.Nil(t, got)
			require.True(t, e.callOn(p, retried("k"), "100", 100).replayed)
			_, _, _, after := lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Equal(t, xmin, after, "a replay writes nothing")

			e.clock.Advance(time.Minute)
			other := e.callOn(p, retried("k"), "200", 200)
			require.ErrorIs(t, other.err, idem.ErrMismatch)
			stored, at, got, after := lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Equal(t, fp("100"), stored, "the stored fingerprint stays")
			assert.Equal(t, fp("200"), got, "the refused request's fingerprint")
			require.NotNil(t, at)
			assert.True(t, e.clock.Now().Equal(*at), "recorded at the store's clock: %s, want %s", at, e.clock.Now())
			assert.NotEqual(t, xmin, after)

			e.clock.Advance(time.Minute)
			require.ErrorIs(t, e.callOn(p, retried("k"), "300", 300).err, idem.ErrMismatch)
			_, at, got, _ = lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Equal(t, fp("300"), got, "the last one")
			assert.True(t, e.clock.Now().Equal(*at))

			again := e.callOn(p, retried("k"), "100", 100)
			require.NoError(t, again.err, "the attempt's connection went back clean")
			assert.True(t, again.replayed)
			assert.Equal(t, int64(1), e.executed.Load())
			assert.Equal(t, int64(2), e.mismatches.Load())
		})
	}
}

// External mode records the refusal in a statement of its own.
func TestMismatchRecordedExternal(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			b := newBank(t)
			m := payoutMethod()
			_, err := idem.External(keyed("p"), e.store, m, payFp("10"), b.payout)
			require.NoError(t, err)
			_, err = idem.External(keyed("p"), e.store, m, payFp("10"), b.payout)
			require.NoError(t, err)
			_, at, _, _ := lastMismatch(t, e.db, m.Name, "p")
			assert.Nil(t, at)
			_, err = idem.External(keyed("p"), e.store, m, payFp("20"), b.payout)
			require.ErrorIs(t, err, idem.ErrMismatch)
			stored, at, got, _ := lastMismatch(t, e.db, m.Name, "p")
			assert.Equal(t, payFp("10"), stored)
			assert.Equal(t, payFp("20"), got)
			require.NotNil(t, at)
			assert.True(t, e.clock.Now().Equal(*at))
		})
	}
}

// Inside the caller's transaction the refusal is recorded outside it: the
// transaction stays usable, its rollback does not take the record with it,
// and a pool of one connection, held by the caller, does not block the
// answer.
func TestMismatchInTxRecordedOutsideTheCallersTransaction(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			require.NoError(t, e.callOn(p, retried("k"), "100", 100).err)
			db := onePool(t, e.db, p)
			s, err := p.newStore(db, idem.WithClock(e.clock.Now))
			require.NoError(t, err)

			ctx := context.Background()
			tx, err := p.begin(ctx, db)
			require.NoError(t, err)
			require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (7)`))
			_, err = p.atomicInTx(keyed("k"), s, tx, e.m, fp("999"), chargeOn(999))
			require.ErrorIs(t, err, idem.ErrMismatch, "answered while the caller holds the pool's only connection")
			require.NoError(t, tx.exec(ctx, `INSERT INTO payments (amount) VALUES (8)`), "the caller's transaction is still usable")
			require.NoError(t, tx.rollback(ctx))
			require.NoError(t, s.Drain(ctx))

			_, at, got, _ := lastMismatch(t, e.db, "Test.Charge", "k")
			assert.Equal(t, fp("999"), got, "recorded, though the caller rolled back")
			require.NotNil(t, at)
			assert.Equal(t, 1, e.count(t, "payments"))
		})
	}
}

// onePool is db's database behind a pool of one connection on path p.
func onePool(t *testing.T, db *idemtest.DB, p path) *idemtest.DB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	one := &idemtest.DB{Pool: pool, URL: db.URL, Name: db.Name}
	if p.name == sqlPath.name {
		one.SQL = stdlib.OpenDBFromPool(pool)
		one.SQL.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = one.SQL.Close() })
	}
	return one
}

// syncBuffer is a log destination written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// On a ledger migrated by an earlier idemgen, without the mismatch
// columns, every path answers as before and the log says what to apply.
func TestMismatchOnALedgerWithoutTheColumns(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			var log syncBuffer
			e := newEnvOn(t, p, idem.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			_, err := e.db.Pool.Exec(context.Background(), `ALTER TABLE idempotency_keys DROP COLUMN mismatch_at, DROP COLUMN mismatch_fingerprint`)
			require.NoError(t, err)

			require.NoError(t, e.callOn(p, retried("k"), "100", 100).err)
			require.True(t, e.callOn(p, retried("k"), "100", 100).replayed)
			require.ErrorIs(t, e.callOn(p, retried("k"), "200", 200).err, idem.ErrMismatch)
			assert.Contains(t, log.String(), "has no mismatch_at, mismatch_fingerprint columns")
			again := e.callOn(p, retried("k"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)

			ctx := context.Background()
			tx, err := p.begin(ctx, e.db)
			require.NoError(t, err)
			_, err = p.atomicInTx(keyed("k"), e.store, tx, e.m, fp("999"), chargeOn(999))
			require.ErrorIs(t, err, idem.ErrMismatch)
			_, err = p.atomicInTx(keyed("k2"), e.store, tx, e.m, fp("5"), chargeOn(5))
			require.NoError(t, err, "the caller's transaction is untouched")
			require.NoError(t, tx.commit(ctx))
			require.NoError(t, e.store.Drain(ctx))

			b := newBank(t)
			m := payoutMethod()
			_, err = idem.External(keyed("p"), e.store, m, payFp("10"), b.payout)
			require.NoError(t, err)
			_, err = idem.External(keyed("p"), e.store, m, payFp("20"), b.payout)
			require.ErrorIs(t, err, idem.ErrMismatch)
			assert.Equal(t, 3, countLines(log.String(), "has no mismatch_at"), "one line per refusal: atomic, in a transaction, external")
			assert.Equal(t, 2, e.count(t, "payments"))
		})
	}
}

func countLines(s, sub string) int {
	n := 0
	for line := range bytes.Lines([]byte(s)) {
		if bytes.Contains(line, []byte(sub)) {
			n++
		}
	}
	return n
}
