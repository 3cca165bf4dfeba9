package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkFloors measures each atomic-mode path beside its floor, the least
// its protocol can cost, all doing the same work (one INSERT of a payment):
//
//   - op=lookup: the replay's floor, one autocommit SELECT of the finished
//     ledger row by its key, the columns a replay answers from;
//   - op=txlookup: the same SELECT sent with BEGIN, the transaction then
//     rolled back without the caller waiting: what a replay cost while the
//     claim came first and opened the transaction with it;
//   - op=replay: the wrapper replaying those keys, in the same order, each
//     call marked a retry (idem.ContextWithRetry: its lookup alone);
//   - op=storm: the same replays, unmarked: the first few run the work and
//     roll it back, then the method's replay rate makes them look up first;
//   - op=floor: the claim's floor, the work, then the whole ledger row
//     (response included) sent with COMMIT;
//   - op=claimed: the wrapper recording a new key, a first attempt (the
//     work with BEGIN and the key's lock, the ledger row with COMMIT; no
//     lookup).
//
// Each reports its round trips per call (tripCounter), which the machine's
// load cannot change:
//
//	go test -run '^$' -bench Floors -count 5 ./runtime/idem | tee floors.txt && benchstat -col /op floors.txt
func BenchmarkFloors(b *testing.B) {
	for _, op := range floorOps {
		b.Run("op="+op.name, func(b *testing.B) {
			var tc tripCounter
			db := idemtest.New(b, idemtest.WithSetup(paymentsDDL), tc.option())
			fn := op.prepare(b, db)
			ctx := context.Background()
			fn(ctx, 0) // warm the statement cache
			i := 0
			tc.report(b)
			for b.Loop() {
				i++
				fn(ctx, i)
			}
		})
	}
}

// TestFloorRoundTrips pins the round trips of the floors and of the
// wrapper's paths beside them, on one connection whose statement cache is
// warm: a lookup is one, and so is a replay (marked a retry,
// idem.ContextWithRetry, it looks up first); the claim's floor is the work's three (BEGIN, INSERT,
// the ledger row with COMMIT), and the claimed path, a first attempt,
// which does not look its key up, two (BEGIN and the key's lock with the
// INSERT, the ledger row with COMMIT): the floor's, but for the BEGIN the
// floor sends alone.
func TestFloorRoundTrips(t *testing.T) {
	want := map[string]int64{"lookup": 1, "txlookup": 1, "replay": 1, "floor": 3, "claimed": 2}
	for _, op := range floorOps {
		if _, ok := want[op.name]; !ok {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			var tc tripCounter
			db := idemtest.New(t, idemtest.WithSetup(paymentsDDL), tc.option(),
				idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.MaxConns = 1 }))
			fn := op.prepare(t, db)
			ctx := context.Background()
			fn(ctx, 0)
			for i := 1; i <= 3; i++ {
				require.Equal(t, want[op.name], tc.count(func() { fn(ctx, i) }), "call %d", i)
			}
		})
	}
}

// floorKeys is how many keys the lookup and replay operations read, in turn.
const floorKeys = 100

// floorOp is one operation of BenchmarkFloors: prepare sets up the database
// and returns the i-th call, which fails the benchmark on an error.
type floorOp struct {
	name    string
	prepare func(t testing.TB, db *idemtest.DB) func(ctx context.Context, i int)
}

var floorOps = []floorOp{
	{name: "lookup", prepare: prepareLookupFloor},
	{name: "txlookup", prepare: prepareTxLookupFloor},
	{name: "replay", prepare: prepareReplayFloor},
	{name: "storm", prepare: prepareStormFloor},
	{name: "floor", prepare: prepareClaimFloor},
	{name: "claimed", prepare: prepareClaimedFloor},
}

// claimFloorKeys claims the keys the lookup and replay operations read.
func claimFloorKeys(t testing.TB, db *idemtest.DB) *idem.Store {
	t.Helper()
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	for i := range floorKeys {
		_, err := idem.Atomic(keyed(floorKey(i)), s, chargeMethod(), fp("1"), charge(1))
		require.NoError(t, err)
	}
	return s
}

func floorKey(i int) string { return fmt.Sprintf("floor-%d", i%floorKeys) }

func ledgerTable(t testing.TB) string {
	t.Helper()
	l, err := ledger.New(idem.DefaultTable)
	require.NoError(t, err)
	return l.Table.Quoted()
}

// lookupSQL reads the columns a replay answers from.
func lookupSQL(t testing.TB) string {
	return fmt.Sprintf(`SELECT fingerprint, status, response, error_name, error_message
FROM %s WHERE scope = $1 AND method = $2 AND key = $3`, ledgerTable(t))
}

// checkLookup scans row and fails t unless it is a finished row of the
// request.
func checkLookup(t testing.TB, row pgx.Row) {
	var (
		rowFP, resp      []byte
		status           string
		errName, errText *string
	)
	require.NoError(t, row.Scan(&rowFP, &status, &resp, &errName, &errText))
	require.True(t, status == "done" && bytes.Equal(rowFP, fp("1")) && len(resp) > 0, "a finished row of the request")
}

func prepareLookupFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	claimFloorKeys(t, db)
	read, method := lookupSQL(t), chargeMethod().Name
	return func(ctx context.Context, i int) {
		checkLookup(t, db.Pool.QueryRow(ctx, read, "", method, floorKey(i)))
	}
}

// prepareTxLookupFloor is the lookup sent with BEGIN in one round trip; the
// ROLLBACK goes out after the caller has the row, as a replay's does.
func prepareTxLookupFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	claimFloorKeys(t, db)
	read, method := lookupSQL(t), chargeMethod().Name
	return func(ctx context.Context, i int) {
		conn, err := db.Pool.Acquire(ctx)
		require.NoError(t, err)
		batch := &pgx.Batch{}
		batch.Queue("BEGIN")
		batch.Queue(read, "", method, floorKey(i))
		br := conn.SendBatch(ctx, batch)
		_, err = br.Exec()
		require.NoError(t, err)
		checkLookup(t, br.QueryRow())
		require.NoError(t, br.Close())
		go func() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			conn.Release()
		}()
	}
}

func prepareReplayFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	return replayFloor(t, db, true)
}

// prepareStormFloor is a storm of replays nothing marks: the store's
// replay rate turns them to lookups first after a few (hint.go).
func prepareStormFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	return replayFloor(t, db, false)
}

// replayFloor replays the keys claimFloorKeys claims, each call marked a
// retry if marked.
func replayFloor(t testing.TB, db *idemtest.DB, marked bool) func(context.Context, int) {
	s := claimFloorKeys(t, db)
	m := chargeMethod()
	return func(_ context.Context, i int) {
		ctx := keyed(floorKey(i))
		if marked {
			ctx = idem.ContextWithRetry(ctx)
		}
		ctx, out := idem.ContextWithOutcome(ctx)
		_, err := idem.Atomic(ctx, s, m, fp("1"), charge(1))
		require.NoError(t, err)
		require.True(t, out.Replayed(), "a replay")
	}
}

// prepareClaimFloor is the claim's floor: the work, then one INSERT of the
// finished ledger row, response included, in the round trip of COMMIT. It
// is not idempotent against concurrent twins (a second row fails the
// primary key and the caller gets the error); the wrapper adds the lookup
// before the work, and answers a row a twin recorded first from that row.
func prepareClaimFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	insert := fmt.Sprintf(`INSERT INTO %s (scope, method, key, fingerprint, status, response, expires_at, intention)
VALUES ('', $1, $2, $3, 'done', $4, now() + $5::bigint * interval '1 microsecond', gen_random_uuid())`, ledgerTable(t))
	method, f, ret := chargeMethod().Name, fp("1"), retention.Microseconds()
	return func(ctx context.Context, i int) {
		conn, err := db.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, "BEGIN")
		require.NoError(t, err)
		var id int64
		require.NoError(t, conn.QueryRow(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, 1).Scan(&id))
		resp, err := json.Marshal(Receipt{PaymentID: id, Amount: 1, Note: "ok", Tags: []string{"a", "b"}})
		require.NoError(t, err)
		batch := &pgx.Batch{}
		batch.Queue(insert, method, fmt.Sprintf("key-%d", i), f, resp, ret)
		batch.Queue("COMMIT")
		require.NoError(t, conn.SendBatch(ctx, batch).Close())
	}
}

func prepareClaimedFloor(t testing.TB, db *idemtest.DB) func(context.Context, int) {
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := chargeMethod()
	return func(_ context.Context, i int) {
		_, err := idem.Atomic(keyed(fmt.Sprintf("key-%d", i)), s, m, fp("1"), charge(1))
		require.NoError(t, err)
	}
}
