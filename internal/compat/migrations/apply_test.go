// Package migrations_test applies the generator's migrations with the real
// tools (goose, golang-migrate and tern as libraries, dbmate and psql as
// binaries, atlas through its own migration library) to a real PostgreSQL.
// It lives in this module so that the tools stay out of the requirements of
// github.com/idemgen/idemgen.
//
// The migrations come from gen/migrations: the fresh scenario from
// migrations.Plan, the evolved one from the golden files that gen/migrations'
// TestGolden holds equal to what Plan writes.
package migrations_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	ternmigrate "github.com/jackc/tern/v2/migrate"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

var methods = []string{"Payments.Refund", "Payments.Charge"}

// userFiles are the user's own migrations, in each format: a schema for the
// second ledger and the work's table. They are byte for byte those of
// gen/migrations' tests, which the evolved goldens were planned after (the
// golden atlas.sum covers them, so TestAtlasValidatesTheSum sees a drift).
func userFiles(format string) map[string][]byte {
	const up = "CREATE SCHEMA billing;\nCREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL);\n"
	const down = "DROP TABLE payments;\nDROP SCHEMA billing;\n"
	switch format {
	case "goose":
		return map[string][]byte{"20240101120000_create_payments.sql": []byte("-- +goose Up\n" + up + "\n-- +goose Down\n" + down)}
	case "golang-migrate":
		return map[string][]byte{"000001_create_payments.up.sql": []byte(up), "000001_create_payments.down.sql": []byte(down)}
	case "tern":
		return map[string][]byte{"001_create_payments.sql": []byte(up + "\n---- create above / drop below ----\n\n" + down)}
	case "dbmate":
		return map[string][]byte{"20240101120000_create_payments.sql": []byte("-- migrate:up\n" + up + "\n-- migrate:down\n" + down)}
	case "atlas":
		return map[string][]byte{"20240101120000_create_payments.sql": []byte(up)}
	case "plain":
		return map[string][]byte{"00001_create_payments.up.sql": []byte(up), "00001_create_payments.down.sql": []byte(down)}
	}
	panic("unknown format " + format)
}

func cfgFor(format string) migrations.Config {
	return migrations.Config{Format: format, Methods: methods}
}

// merge returns the directory after writing out over dir.
func merge(dir, out map[string][]byte) map[string][]byte {
	m := maps.Clone(dir)
	maps.Copy(m, out)
	return m
}

// scenarios returns, per scenario, a migration directory, the user's files
// included:
//
//	fresh:   the ledger planned after the user's migration.
//	evolved: the user's migration, a ledger created by an earlier schema
//	         version, brought up to date (one ALTER migration and a concurrent
//	         index), then the table switched to billing.idempotency_keys (one
//	         new migration): gen/migrations' golden files.
func scenarios(t testing.TB, format string) map[string]map[string][]byte {
	t.Helper()
	fresh, err := migrations.Plan(cfgFor(format), userFiles(format))
	require.NoError(t, err)
	golden := filepath.Join("..", "..", "..", "gen", "migrations", "testdata", format, "evolved")
	evolved, err := migrations.ReadDir(os.DirFS(golden), ".")
	require.NoError(t, err)
	require.NotEmpty(t, evolved, "golden files in %s", golden)
	return map[string]map[string][]byte{
		"fresh":   merge(userFiles(format), fresh),
		"evolved": merge(userFiles(format), evolved),
	}
}

// upTo returns the files of dir whose names sort before the first file of
// the concurrent index build (the first whose name holds "_index_").
func upTo(dir map[string][]byte) map[string][]byte {
	first := ""
	for n := range dir {
		if strings.Contains(n, "_index_") && (first == "" || n < first) {
			first = n
		}
	}
	out := map[string][]byte{}
	for n, b := range dir {
		if first == "" || n < first {
			out[n] = b
		}
	}
	return out
}

// The tables the evolved scenario ends with.
var ledgerTables = []string{"idempotency_keys", "billing.idempotency_keys"}

// writeDir writes a scenario directory to a temporary directory.
func writeDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for n, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
	}
	return dir
}

// tool applies a migration directory with a real migration tool.
type tool struct {
	up, down func(t *testing.T, ctx context.Context, dbURL, dir string) error
}

var tools = map[string]tool{
	"goose": {
		up: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			_, err := gooseProvider(t, dbURL, dir).Up(ctx)
			return err
		},
		down: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			_, err := gooseProvider(t, dbURL, dir).DownTo(ctx, 0)
			return err
		},
	},
	"golang-migrate": {
		up: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			return golangMigrate(t, dbURL, dir).Up()
		},
		down: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			return golangMigrate(t, dbURL, dir).Down()
		},
	},
	"tern": {
		up: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			return ternMigrator(t, ctx, dbURL, dir).Migrate(ctx)
		},
		down: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			return ternMigrator(t, ctx, dbURL, dir).MigrateTo(ctx, 0)
		},
	},
	"dbmate": {
		up: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			return runTool(ctx, toolBinary(t, "dbmate"), "--url", dbmateURL(t, dbURL), "--migrations-dir", dir, "--no-dump-schema", "up")
		},
		down: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			for range sqlFiles(t, dir, "") {
				if err := runTool(ctx, toolBinary(t, "dbmate"), "--url", dbmateURL(t, dbURL), "--migrations-dir", dir, "--no-dump-schema", "rollback"); err != nil {
					return err
				}
			}
			return nil
		},
	},
	"plain": {
		up: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			for _, f := range sqlFiles(t, dir, ".up.sql") {
				if err := runTool(ctx, psql(t), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-f", f); err != nil {
					return err
				}
			}
			return nil
		},
		down: func(t *testing.T, ctx context.Context, dbURL, dir string) error {
			files := sqlFiles(t, dir, ".down.sql")
			slices.Reverse(files)
			for _, f := range files {
				if err := runTool(ctx, psql(t), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-f", f); err != nil {
					return err
				}
			}
			return nil
		},
	},
	// The atlas CLI ships no installable package here; its own migration
	// library applies the files (see atlasUp). Atlas plans rollbacks itself
	// (atlas migrate down), so there is no down step.
	"atlas": {up: atlasUp},
}

func gooseProvider(t *testing.T, dbURL, dir string) *goose.Provider {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(dir))
	require.NoError(t, err)
	return p
}

func golangMigrate(t *testing.T, dbURL, dir string) *migrate.Migrate {
	t.Helper()
	src, err := iofs.New(os.DirFS(dir), ".")
	require.NoError(t, err)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Scheme = "pgx5"
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = m.Close() })
	return m
}

func ternMigrator(t *testing.T, ctx context.Context, dbURL, dir string) *ternmigrate.Migrator {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	m, err := ternmigrate.NewMigrator(ctx, conn, "public.schema_version")
	require.NoError(t, err)
	require.NoError(t, m.LoadMigrations(os.DirFS(dir)))
	return m
}

// dbmateURL adds what dbmate's driver needs to idemtest's URL.
func dbmateURL(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// sqlFiles lists the files of dir with the suffix, in name order.
func sqlFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") && strings.HasSuffix(e.Name(), suffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

// toolBinary finds a binary that scripts/install-tools.sh installs.
func toolBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", ".tools", "bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed at %s: run scripts/install-tools.sh first (%v)", name, p, err)
	}
	return p
}

func psql(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(matches) == 0 {
		t.Fatalf("psql not found on PATH or under /usr/lib/postgresql/*/bin: install the PostgreSQL client (apt-get install postgresql-client)")
	}
	slices.Sort(matches)
	return matches[len(matches)-1]
}

func runTool(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return nil
}

// TestToolsApplyMigrations applies each format's migrations with the real
// tool to a fresh database: up, down, up again. Afterwards every ledger the
// scenario asks for exists with its primary key, its columns, its expires_at
// index (valid) and its storage settings, and idem.Atomic runs against it.
func TestToolsApplyMigrations(t *testing.T) {
	for _, format := range migrations.Formats() {
		for _, scenario := range []string{"fresh", "evolved"} {
			t.Run(format+"/"+scenario, func(t *testing.T) {
				ctx := context.Background()
				files := scenarios(t, format)[scenario]
				tables := ledgerTables
				if scenario == "fresh" {
					tables = ledgerTables[:1]
				}
				dir := writeDir(t, files)
				db := idemtest.New(t, idemtest.WithoutLedger())
				tl := tools[format]

				require.NoError(t, tl.up(t, ctx, db.URL, dir), "up")
				for _, table := range tables {
					checkLedger(t, db.Pool, table)
				}
				if tl.down != nil {
					require.NoError(t, tl.down(t, ctx, db.URL, dir), "down")
					for _, table := range tables {
						assert.False(t, exists(t, db.Pool, table), "%s is gone after rolling everything back", table)
					}
					require.NoError(t, tl.up(t, ctx, db.URL, dir), "up again")
					for _, table := range tables {
						checkLedger(t, db.Pool, table)
					}
				}
				for _, table := range tables {
					checkAtomic(t, db.Pool, table)
				}
			})
		}
	}
}

func exists(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok))
	return ok
}

// checkLedger compares the table in the database with idem.LedgerSchema.
func checkLedger(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	ctx := context.Background()
	want, err := idem.LedgerSchema(table)
	require.NoError(t, err)
	require.True(t, exists(t, pool, table), "%s exists", table)

	rows, err := pool.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attname`, table)
	require.NoError(t, err)
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	var wantCols []string
	for _, c := range want.Columns {
		wantCols = append(wantCols, c.Name)
	}
	slices.Sort(wantCols)
	assert.Equal(t, wantCols, cols, "%s columns", table)

	var pkName string
	var pkCols []string
	require.NoError(t, pool.QueryRow(ctx, `
SELECT c.conname, array_agg(a.attname ORDER BY k.n)
FROM pg_constraint c
CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
WHERE c.conrelid = $1::regclass AND c.contype = 'p'
GROUP BY c.conname`, table).Scan(&pkName, &pkCols))
	assert.Equal(t, want.PrimaryKeyName(), pkName)
	assert.Equal(t, want.Key, pkCols, "%s primary key: the unique index claims rely on", table)

	for _, ix := range want.Indexes {
		name := want.Table.Derived(ix.Suffix)
		if want.Table.Schema != "" {
			name = want.Table.Schema + "." + name
		}
		var valid bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, name).Scan(&valid), "index %s exists", name)
		assert.True(t, valid, "index %s is valid", name)
	}

	var opts []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, table).Scan(&opts))
	var wantOpts []string
	for _, p := range want.Storage {
		wantOpts = append(wantOpts, p[0]+"="+p[1])
	}
	assert.ElementsMatch(t, wantOpts, opts, "%s storage parameters", table)
}

// checkAtomic runs an idempotent call twice through idem.Atomic against the
// migrated ledger: the work runs once and the retry replays.
func checkAtomic(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	store, err := idem.NewStore(pool, idem.WithTable(table))
	require.NoError(t, err)
	m := &idem.Method[int64]{Name: "Payments.Charge", Retention: time.Hour}
	f := idem.NewFingerprinter(m.Name)
	f.Field("amount")
	f.String("100")
	fp := f.Sum()
	runs := 0
	body := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		runs++
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id)
		return id, err
	}
	ctx := idem.ContextWithKey(context.Background(), "key-"+strings.ReplaceAll(table, ".", "-"))
	first, err := idem.Atomic(ctx, store, m, fp, body)
	require.NoError(t, err, "first call against %s", table)
	second, err := idem.Atomic(idem.ContextWithRetry(ctx), store, m, fp, body) // a marked retry looks the key up first
	require.NoError(t, err, "retry against %s", table)
	assert.Equal(t, first, second, "the retry replays the stored response")
	assert.Equal(t, 1, runs, "the work ran once")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+quoteTable(table)).Scan(&n))
	assert.Equal(t, 1, n, "one ledger row in %s", table)
}

func quoteTable(table string) string {
	id, err := idem.ParseIdent(table)
	if err != nil {
		panic(err)
	}
	return id.Quoted()
}

// TestConcurrentIndexCheckStopsOnInvalidIndex proves the check after a
// concurrent build: with an INVALID index left by a failed build, IF NOT
// EXISTS skips the build and the migration must fail instead of passing.
func TestConcurrentIndexCheckStopsOnInvalidIndex(t *testing.T) {
	ctx := context.Background()
	all := scenarios(t, "goose")["evolved"]
	db := idemtest.New(t, idemtest.WithoutLedger())

	// Apply everything before the concurrent build.
	_, err := gooseProvider(t, db.URL, writeDir(t, upTo(all))).Up(ctx)
	require.NoError(t, err)

	// Leave an INVALID index with the same name behind, as a failed build
	// does: a unique index over duplicate values.
	_, err = db.Pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, expires_at)
VALUES ('s', 'm', 'a', '\x00', 'done', '2000-01-01'), ('s', 'm', 'b', '\x00', 'done', '2000-01-01')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY idempotency_keys_expires_at_idx ON idempotency_keys (expires_at)`)
	require.Error(t, err, "the unique build fails on the duplicates")
	var valid bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'idempotency_keys_expires_at_idx'::regclass`).Scan(&valid))
	require.False(t, valid, "the failed build left an INVALID index")

	_, err = gooseProvider(t, db.URL, writeDir(t, all)).Up(ctx)
	require.Error(t, err, "the migration stops on the INVALID index")
	assert.Contains(t, err.Error(), "is INVALID after a failed concurrent build")

	// The repair the header describes works.
	_, err = db.Pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS "idempotency_keys_expires_at_idx"`)
	require.NoError(t, err)
	_, err = gooseProvider(t, db.URL, writeDir(t, all)).Up(ctx)
	require.NoError(t, err)
	checkLedger(t, db.Pool, "idempotency_keys")
}

// TestLockTimeoutReachesTheConcurrentBuild holds a lock that CREATE INDEX
// CONCURRENTLY must wait for and runs the migrations with each tool: the
// build gives up after the configured lock_timeout instead of queueing. For
// golang-migrate and dbmate this proves that the settings migration before
// the lone build runs on the same connection. The golden files set the
// default lock_timeout; the test lowers it in their text, as a user who
// configures -lock-timeout would get it.
func TestLockTimeoutReachesTheConcurrentBuild(t *testing.T) {
	want := fmt.Sprintf("lock_timeout = '%s'", migrations.DefaultLockTimeout)
	for _, format := range migrations.Formats() {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			all := scenarios(t, format)["evolved"]
			for n, b := range all {
				all[n] = bytes.ReplaceAll(b, []byte(want), []byte("lock_timeout = '300ms'"))
			}
			before := upTo(all)
			if format == "atlas" {
				delete(before, migrations.AtlasSumFile)
			}
			db := idemtest.New(t, idemtest.WithoutLedger())
			tl := tools[format]
			require.NoError(t, tl.up(t, ctx, db.URL, writeDir(t, before)))

			tx, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, "LOCK TABLE idempotency_keys IN SHARE UPDATE EXCLUSIVE MODE")
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			pending := all
			if format == "plain" || format == "atlas" {
				// psql keeps no record of what ran: give it only the new files.
				pending = map[string][]byte{}
				for n, b := range all {
					if strings.Contains(n, "_index_") {
						pending[n] = b
					}
				}
			}
			err = tl.up(t, ctx, db.URL, writeDir(t, pending))
			require.Error(t, err, "the concurrent build must not wait for the lock")
			assert.Contains(t, err.Error(), "lock timeout")
		})
	}
}
