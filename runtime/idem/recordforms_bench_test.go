package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkRecordForms weighs the two forms of Atomic's record statement
// for a new key, on a server of its own with pg_stat_statements: each
// call is the claimed path's transaction without its lookup (BEGIN, the
// work's INSERT, the record, COMMIT, in one batch), and reports the
// record's own execution time on the server (server-µs/op, from
// pg_stat_statements) and the WAL a call writes (WAL-B/op):
//
//   - op=floor: the floor's INSERT of the ledger row (prepareClaimFloor's);
//   - op=fresh: the record's fresh form, a plain INSERT, which Atomic sends
//     when its lookup found no row;
//   - op=upsert: the record's takeover form, INSERT … ON CONFLICT DO
//     UPDATE, on the same new key: what every new key cost before the fresh
//     form (the runtime sends it for an expired key only).
//
// Run it with:
//
//	go test -run '^$' -bench RecordForms -benchtime 3000x -count 5 ./runtime/idem | tee forms.txt && benchstat -col /op forms.txt
func BenchmarkRecordForms(b *testing.B) {
	srv, err := idemtest.Start(b.Context(), idemtest.WithSettings("shared_preload_libraries=pg_stat_statements"))
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Stop() })
	floor := fmt.Sprintf(`INSERT INTO %s (scope, method, key, fingerprint, status, response, expires_at, intention)
VALUES ('', $1, $2, $3, 'done', $4, now() + $5::bigint * interval '1 microsecond', gen_random_uuid())`, ledgerTable(b))
	resp, err := json.Marshal(Receipt{PaymentID: 1, Amount: 1, Note: "ok", Tags: []string{"a", "b"}})
	require.NoError(b, err)
	m, f := chargeMethod().Name, fp("1")
	forms := []struct {
		name string
		stmt func(s *idem.Store, key string) (string, []any)
	}{
		{"floor", func(_ *idem.Store, key string) (string, []any) {
			return floor, []any{m, key, f, resp, retention.Microseconds()}
		}},
		{"fresh", func(s *idem.Store, key string) (string, []any) {
			return idem.RecordForNewKey(s, m, key, f, resp, false)
		}},
		{"upsert", func(s *idem.Store, key string) (string, []any) { return idem.RecordForNewKey(s, m, key, f, resp, true) }},
	}
	for _, form := range forms {
		b.Run("op="+form.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := srv.NewDB(ctx, "forms_"+form.name, idemtest.WithSetup(paymentsDDL, "CREATE EXTENSION pg_stat_statements"))
			require.NoError(b, err)
			defer db.Close()
			s, err := idem.NewStore(db.Pool)
			require.NoError(b, err)
			conn, err := db.Pool.Acquire(ctx)
			require.NoError(b, err)
			defer conn.Release()
			call := func(i int) {
				stmt, args := form.stmt(s, fmt.Sprintf("key-%d", i))
				batch := &pgx.Batch{}
				batch.Queue("BEGIN")
				batch.Queue(`INSERT INTO payments (amount) VALUES ($1) RETURNING id`, 1)
				batch.Queue(stmt, args...)
				batch.Queue("COMMIT")
				require.NoError(b, conn.SendBatch(ctx, batch).Close())
			}
			call(-1) // warm the statement cache
			var walStart int64
			require.NoError(b, conn.QueryRow(ctx, `SELECT pg_stat_statements_reset() IS NULL, pg_current_wal_insert_lsn() - '0/0'`).Scan(new(bool), &walStart))
			stmt, _ := form.stmt(s, "")
			i := 0
			for b.Loop() {
				call(i)
				i++
			}
			b.StopTimer()
			var micros float64
			var walEnd int64
			require.NoError(b, conn.QueryRow(ctx, `SELECT coalesce(sum(total_exec_time) * 1000, 0), pg_current_wal_insert_lsn() - '0/0'
FROM pg_stat_statements WHERE query = $1 AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`, stmt).Scan(&micros, &walEnd))
			b.ReportMetric(micros/float64(i), "server-µs/op")
			b.ReportMetric(float64(walEnd-walStart)/float64(i), "WAL-B/op")
		})
	}
}
