package migrations_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestToolsRetryTheLockWithoutStallingWriters applies, with each real tool,
// an ALTER migration on a table that a report's open transaction holds while
// writers insert into it: the inline columns on payments, and the ledger's
// own ALTER on idempotency_keys. The report ends only once the migration has
// been seen sleeping between two lock attempts (pg_stat_activity shows it in
// pg_sleep), so every tool has run the retry loop; the migration then goes
// through. The longest insert meanwhile is logged, not asserted.
func TestToolsRetryTheLockWithoutStallingWriters(t *testing.T) {
	cases := []struct {
		scenario, table, split, insert string
	}{
		{"inline", "payments", "_idemgen_inline_", "INSERT INTO payments (amount) VALUES ($1)"},
		{"evolved", "idempotency_keys", "_idemgen_alter_",
			`INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, expires_at) VALUES ('s', 'M', $1::bigint::text, '\x00', 'done', now() + interval '1 hour')`},
	}
	for _, format := range migrations.Formats() {
		for _, c := range cases {
			t.Run(format+"/"+c.scenario, func(t *testing.T) {
				golden := filepath.Join("..", "..", "..", "gen", "migrations", "testdata", format, c.scenario)
				planned, err := migrations.ReadDir(os.DirFS(golden), ".")
				require.NoError(t, err)
				all := merge(userFiles(format), planned)
				delete(all, migrations.AtlasSumFile)
				before, after := splitAt(all, c.split)
				if format != "plain" && format != "atlas" {
					after = all // the tool records what ran; psql and this atlas runner do not
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				db := idemtest.New(t, idemtest.WithoutLedger())
				tl := tools[format]
				require.NoError(t, tl.up(t, ctx, db.URL, writeDir(t, before)), "the migrations before the ALTER")
				stallRun(t, ctx, db, c.table, c.insert, func() error { return tl.up(t, ctx, db.URL, writeDir(t, after)) })
			})
		}
	}
}

// splitAt splits a directory before the first file whose name holds mark.
func splitAt(dir map[string][]byte, mark string) (before, from map[string][]byte) {
	first := ""
	for n := range dir {
		if strings.Contains(n, mark) && (first == "" || n < first) {
			first = n
		}
	}
	before, from = map[string][]byte{}, map[string][]byte{}
	for n, b := range dir {
		if n < first {
			before[n] = b
		} else {
			from[n] = b
		}
	}
	return before, from
}

// stallRun holds table with a report's transaction, keeps four writers
// inserting, runs migrate, ends the report once the migration is seen
// backing off, and checks that the migration and every insert went through.
func stallRun(t *testing.T, ctx context.Context, db *idemtest.DB, table, insert string, migrate func() error) {
	t.Helper()
	report, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = report.Rollback(context.Background()) }()
	_, err = report.Exec(ctx, "SELECT count(*) FROM "+table)
	require.NoError(t, err)

	stop := make(chan struct{})
	var mu sync.Mutex
	var longest time.Duration
	var inserts int
	var werrs []error
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := db.Pool.Exec(ctx, insert, int64(g)*1_000_000+int64(i))
				mu.Lock()
				longest, inserts = max(longest, time.Since(start)), inserts+1
				if err != nil {
					werrs = append(werrs, err)
				}
				mu.Unlock()
			}
		}()
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- migrate() }()
	sawBackoff := false
	for !sawBackoff {
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Fail(t, "the migration finished while the report still held the table")
		case <-time.After(2 * time.Millisecond):
		}
		// Only the migration sleeps in this database. (Its query text cannot
		// tell: tools that send a whole file show only its first 1024 bytes.)
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
WHERE datname = current_database() AND wait_event = 'PgSleep')`).Scan(&sawBackoff))
	}
	require.NoError(t, report.Commit(ctx))
	require.NoError(t, <-done, "the migration goes through once the report ends")
	total := time.Since(start)
	close(stop)
	wg.Wait()
	require.Empty(t, werrs, "writers")
	t.Logf("%s: the migration backed off at least once and went through in %s; %d inserts meanwhile, the longest %s",
		table, total.Round(time.Millisecond), inserts, longest.Round(time.Millisecond))
	assert.Positive(t, inserts)
}
