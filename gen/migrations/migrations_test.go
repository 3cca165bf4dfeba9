package migrations

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) { idemtest.Main(m) }

var methods = []string{"Payments.Refund", "Payments.Charge"}

// oldLedger is the ledger as an earlier schema version had it: without the
// steps and locked_until columns, the expires_at index and the storage
// settings. Migrations written for it let the tests exercise schema changes.
func oldLedger(t testing.TB) idem.Ledger {
	t.Helper()
	l, err := idem.LedgerSchema(idem.DefaultTable)
	require.NoError(t, err)
	l.Columns = slices.DeleteFunc(slices.Clone(l.Columns), func(c idem.Column) bool {
		return c.Name == "steps" || c.Name == "locked_until"
	})
	l.Indexes = nil
	l.Storage = nil
	return l
}

// userFiles are the user's own migrations, in each format: a schema for the
// second ledger and the work's table. Their versions are chosen the way each
// tool names files, so the tests show idemgen numbering after them.
func userFiles(format string) map[string][]byte {
	return userFilesOf(format, "CREATE SCHEMA billing;\nCREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL);\n",
		"DROP TABLE payments;\nDROP SCHEMA billing;\n")
}

// citusUserFiles is the user's migration a Citus ledger is planned after:
// the business table, distributed by its tenant column.
func citusUserFiles(format string) map[string][]byte {
	return userFilesOf(format, "CREATE TABLE orders (tenant_id text NOT NULL, id bigserial, PRIMARY KEY (tenant_id, id));\nSELECT create_distributed_table('orders', 'tenant_id');\n",
		"DROP TABLE orders;\n")
}

// userFilesOf is a user's migration in format, with up and down.
func userFilesOf(format, up, down string) map[string][]byte {
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

func cfgFor(format string) Config {
	return Config{Format: format, Methods: methods}
}

// merge returns the directory after writing out over dir.
func merge(dir, out map[string][]byte) map[string][]byte {
	m := maps.Clone(dir)
	maps.Copy(m, out)
	return m
}

// scenarios returns, per scenario, the directory content (user files
// included) after running Plan:
//
//	fresh:   an empty directory.
//	evolved: the user's migration, a ledger created by an earlier schema
//	         version (oldLedger), brought up to date (one ALTER migration and a
//	         concurrent index), then the table switched to
//	         billing.idempotency_keys (one new migration).
//	citus:   the user's migration distributing orders, then a ledger
//	         distributed by scope, co-located with it (-distributed).
//	citus-later: fresh's ledger, then distributed (a migration of its own).
func scenarios(t testing.TB, format string) map[string]map[string][]byte {
	t.Helper()
	fresh, err := Plan(cfgFor(format), nil)
	require.NoError(t, err)

	dir := userFiles(format)
	old, err := plan(mustDefaults(t, cfgFor(format)), oldLedger(t), dir)
	require.NoError(t, err)
	dir = merge(dir, old)
	cur, err := Plan(cfgFor(format), dir)
	require.NoError(t, err)
	dir = merge(dir, cur)
	cfg := cfgFor(format)
	cfg.Table = "billing.idempotency_keys"
	moved, err := Plan(cfg, dir)
	require.NoError(t, err)
	dir = merge(dir, moved)

	cfg = cfgFor(format)
	cfg.Distributed = "citus:orders.tenant_id"
	citus, err := Plan(cfg, citusUserFiles(format))
	require.NoError(t, err)
	later, err := Plan(cfg, fresh)
	require.NoError(t, err)
	return map[string]map[string][]byte{"fresh": fresh, "evolved": dir, "citus": merge(citusUserFiles(format), citus), "citus-later": merge(maps.Clone(fresh), later)}
}

func mustDefaults(t testing.TB, cfg Config) Config {
	t.Helper()
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	return cfg
}

// owned drops the user's files from a directory.
func owned(dir map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for n, b := range dir {
		if isOwned(b) || n == AtlasSumFile {
			out[n] = b
		}
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, format := range Formats() {
		for name, dir := range scenarios(t, format) {
			t.Run(format+"/"+name, func(t *testing.T) {
				golden := filepath.Join("testdata", format, name)
				got := owned(dir)
				if *update {
					require.NoError(t, os.RemoveAll(golden))
					require.NoError(t, os.MkdirAll(golden, 0o755))
					for n, b := range got {
						require.NoError(t, os.WriteFile(filepath.Join(golden, n), b, 0o644))
					}
					return
				}
				want, err := ReadDir(os.DirFS("."), filepath.ToSlash(golden))
				require.NoError(t, err)
				require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "files (run go test ./gen/migrations -update after a deliberate change)")
				for n := range want {
					assert.Equal(t, string(want[n]), string(got[n]), "%s (run go test ./gen/migrations -update after a deliberate change)", n)
				}
			})
		}
	}
}

func TestPlanTwiceWritesNothingNew(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			dir := scenarios(t, format)["evolved"]
			cfg := cfgFor(format)
			cfg.Table = "billing.idempotency_keys"
			again, err := Plan(cfg, dir)
			require.NoError(t, err)
			assert.Equal(t, owned(dir), again, "a second run returns exactly the files already there")

			cfg.Methods = []string{"Payments.Capture"}
			again, err = Plan(cfg, dir)
			require.NoError(t, err)
			assert.Equal(t, owned(dir), again, "the methods only feed new headers; a change of methods alone writes nothing")
		})
	}
}

func TestChangingTableAddsExactlyOneMigration(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			dir, err := Plan(cfgFor(format), userFiles(format))
			require.NoError(t, err)
			dir = merge(userFiles(format), dir)
			cfg := cfgFor(format)
			cfg.Table = "billing.idempotency_keys"
			out, err := Plan(cfg, dir)
			require.NoError(t, err)
			var added []string
			for n, b := range out {
				if old, ok := dir[n]; ok {
					if n != AtlasSumFile {
						assert.Equal(t, string(old), string(b), "%s is never rewritten", n)
					}
					continue
				}
				added = append(added, n)
			}
			for n := range owned(dir) {
				assert.Contains(t, out, n, "every earlier idemgen file is kept")
			}
			want := 1
			if format == "golang-migrate" || format == "plain" {
				want = 2 // one migration: its .up.sql and .down.sql
			}
			require.Len(t, added, want, "added %v", added)
			for _, n := range added {
				assert.Contains(t, n, "_idemgen_create_billing_idempotency_keys.")
				assert.Contains(t, string(out[n]), "This replaces the ledger table idempotency_keys")
			}
		})
	}
}

func TestNumbersFollowTheUsersMigrations(t *testing.T) {
	want := map[string][]string{
		"goose":          {"20240101120001_idemgen_create_idempotency_keys.sql"},
		"golang-migrate": {"000002_idemgen_create_idempotency_keys.down.sql", "000002_idemgen_create_idempotency_keys.up.sql"},
		"tern":           {"002_idemgen_create_idempotency_keys.sql"},
		"dbmate":         {"20240101120001_idemgen_create_idempotency_keys.sql"},
		"atlas":          {"20240101120001_idemgen_create_idempotency_keys.sql", AtlasSumFile},
		"plain":          {"00002_idemgen_create_idempotency_keys.down.sql", "00002_idemgen_create_idempotency_keys.up.sql"},
	}
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			out, err := Plan(cfgFor(format), userFiles(format))
			require.NoError(t, err)
			assert.Equal(t, want[format], slices.Sorted(maps.Keys(out)), "user files are never returned; new ones sort after them")
		})
	}
}

func TestEvolvedAddsAlterAndConcurrentIndex(t *testing.T) {
	dir := scenarios(t, "goose")["evolved"]
	names := slices.Sorted(maps.Keys(owned(dir)))
	assert.Equal(t, []string{
		"20240101120001_idemgen_create_idempotency_keys.sql",
		"20240101120002_idemgen_alter_idempotency_keys.sql",
		"20240101120003_idemgen_index_idempotency_keys_expires_at_idx.sql",
		"20240101120004_idemgen_create_billing_idempotency_keys.sql",
	}, names)
	alter := string(dir[names[1]])
	assert.Contains(t, alter, `ADD COLUMN IF NOT EXISTS "steps" jsonb NOT NULL DEFAULT '{}'::jsonb;`)
	assert.Contains(t, alter, `ADD COLUMN IF NOT EXISTS "locked_until" timestamptz;`)
	assert.Contains(t, alter, `SET (autovacuum_analyze_scale_factor = 0.02`)
	assert.Contains(t, alter, `RESET (autovacuum_analyze_scale_factor`)
	index := string(dir[names[2]])
	assert.Contains(t, index, "-- +goose NO TRANSACTION")
	assert.Contains(t, index, "SET lock_timeout = '5s';")
	assert.Contains(t, index, `CREATE INDEX CONCURRENTLY IF NOT EXISTS "idempotency_keys_expires_at_idx"`)
	assert.Contains(t, index, "WHERE NOT indisvalid", "the header says how to find an INVALID index")
	assert.Contains(t, index, "DROP INDEX CONCURRENTLY IF EXISTS")
	assert.NotContains(t, index, "CREATE TABLE")
}

func TestLoneStatementFormatsSplitTheConcurrentBuild(t *testing.T) {
	for _, format := range []string{"golang-migrate", "dbmate"} {
		t.Run(format, func(t *testing.T) {
			dir := owned(scenarios(t, format)["evolved"])
			for n, b := range dir {
				if !strings.Contains(n, "_index_") || strings.Contains(n, "_timeouts") || strings.Contains(n, "_check") {
					continue
				}
				body := string(b)
				_, sql, _ := strings.Cut(body, "\n\n") // after the header
				for _, part := range strings.Split(sql, "-- migrate:down") {
					assert.Equal(t, 1, strings.Count(part, ";\n")+boolInt(!strings.HasSuffix(part, "\n")), "%s: one statement per direction:\n%s", n, part)
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestHeaders(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			for n, b := range owned(scenarios(t, format)["evolved"]) {
				if n == AtlasSumFile {
					continue
				}
				s := string(b)
				assert.True(t, strings.HasPrefix(s, GeneratedLine+"\n"), "%s: generated line first", n)
				assert.Contains(t, s, "-- Needed by: Payments.Charge, Payments.Refund.", n)
				assert.Contains(t, s, "-- Roll back: ", n)
				if strings.Contains(s, "CREATE INDEX CONCURRENTLY") {
					assert.Contains(t, s, "INVALID", n)
					assert.Contains(t, s, "DROP INDEX CONCURRENTLY IF EXISTS", n)
				}
				assert.NotContains(t, s, "{down}", n)
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	_, err := Plan(Config{Format: "flyway"}, nil)
	require.ErrorContains(t, err, `unknown migration format "flyway"`)

	_, err = Plan(Config{Table: "Robert'); DROP TABLE students;--"}, nil)
	require.ErrorContains(t, err, "not a safe SQL identifier")

	goose, err := Plan(cfgFor("goose"), nil)
	require.NoError(t, err)
	_, err = Plan(cfgFor("dbmate"), goose)
	require.ErrorContains(t, err, "in the goose format, not dbmate")

	// A ledger whose key differs cannot be migrated in place.
	l := oldLedger(t)
	l.Key = []string{"method", "key"}
	old, err := plan(mustDefaults(t, cfgFor("goose")), l, nil)
	require.NoError(t, err)
	_, err = Plan(cfgFor("goose"), old)
	require.ErrorContains(t, err, "choose a new -table")

	// A state line from an unknown version is refused, not guessed at.
	for n, b := range goose {
		goose[n] = []byte(strings.Replace(string(b), "idemgen: v=1", "idemgen: v=9", 1))
	}
	_, err = Plan(cfgFor("goose"), goose)
	require.ErrorContains(t, err, "another version of idemgen")
}

func TestUserFilesAreIgnored(t *testing.T) {
	// A user's file that mentions idemgen but was not written by it is
	// neither read for state nor returned.
	dir := map[string][]byte{"00007_mine.sql": []byte("-- +goose Up\n-- idemgen: v=1 format=goose table=idempotency_keys creates=table\nSELECT 1;\n")}
	out, err := Plan(cfgFor("goose"), dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"00008_idemgen_create_idempotency_keys.sql"}, slices.Sorted(maps.Keys(out)))
}

func TestLockTimeoutIsConfigurable(t *testing.T) {
	cfg := cfgFor("goose")
	cfg.LockTimeout = 1500 * 1e6 // 1.5s
	out, err := Plan(cfg, nil)
	require.NoError(t, err)
	for _, b := range out {
		assert.Contains(t, string(b), "SET LOCAL lock_timeout = '1500ms';")
	}
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00001_a.sql"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "00002_b.sql"), []byte("y"), 0o644))
	got, err := ReadDir(os.DirFS(dir), ".")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"00001_a.sql": []byte("x")}, got, "regular files directly in the directory only")

	got, err = ReadDir(os.DirFS(dir), "missing")
	require.NoError(t, err)
	assert.Empty(t, got, "a directory that does not exist yet reads as empty")
}

// TestCitusSettingIsKept refuses to drop or change the distribution an
// earlier migration wrote: idemgen writes no migration that undoes or moves
// a distributed table.
func TestCitusSettingIsKept(t *testing.T) {
	cfg := cfgFor(DefaultFormat)
	cfg.Distributed = "citus:orders.tenant_id"
	dir, err := Plan(cfg, nil)
	require.NoError(t, err)
	again, err := Plan(cfg, dir)
	require.NoError(t, err)
	assert.Equal(t, dir, again, "a second run writes nothing new")

	cfg.Distributed = ""
	_, err = Plan(cfg, dir)
	assert.ErrorContains(t, err, "was distributed on Citus (distributed=citus:orders.tenant_id) by an earlier migration")
	cfg.Distributed = "citus:accounts.tenant_id"
	_, err = Plan(cfg, dir)
	assert.ErrorContains(t, err, "as citus:orders.tenant_id by an earlier migration, not citus:accounts.tenant_id")
	cfg.Distributed = "citus:idempotency_keys.scope"
	_, err = Plan(cfg, dir)
	assert.ErrorContains(t, err, "names the ledger idempotency_keys itself")
}
