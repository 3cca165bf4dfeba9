package migrations

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inlineCfg is a package with one ledger method and one inline method whose
// keys live in payments, the table the user's own migration creates.
func inlineCfg(format string) Config {
	cfg := cfgFor(format)
	cfg.Inline = []InlineTable{{Table: "payments", Methods: []string{"Payments.Capture"}}}
	return cfg
}

// inlineScenario is the user's migration, then everything Plan adds for the
// ledger and for inline mode on payments.
func inlineScenario(t testing.TB, format string) map[string][]byte {
	t.Helper()
	dir := userFiles(format)
	out, err := Plan(inlineCfg(format), dir)
	require.NoError(t, err)
	return merge(dir, out)
}

func TestInlineGolden(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			golden := filepath.Join("testdata", format, "inline")
			got := owned(inlineScenario(t, format))
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

func TestInlinePlanTwiceWritesNothingNew(t *testing.T) {
	for _, format := range Formats() {
		dir := inlineScenario(t, format)
		again, err := Plan(inlineCfg(format), dir)
		require.NoError(t, err)
		assert.Equal(t, owned(dir), again, "%s: a second run returns the same files, byte for byte", format)
	}
}

// Without a migration that creates the table, the header says what it
// assumes; with one, it names it.
func TestInlineHeaderSaysWhatItAssumes(t *testing.T) {
	out, err := Plan(inlineCfg("goose"), nil)
	require.NoError(t, err)
	var header string
	for n, b := range out {
		if strings.Contains(n, "_inline_payments") {
			header = string(b)
		}
	}
	require.NotEmpty(t, header)
	assert.Contains(t, strings.Join(strings.Fields(strings.ReplaceAll(header, "--", "")), " "),
		"Assumes the table payments already exists: no migration in this directory creates it")
	for n, b := range owned(inlineScenario(t, "goose")) {
		if strings.Contains(n, "payments") {
			assert.Contains(t, strings.Join(strings.Fields(strings.ReplaceAll(string(b), "--", "")), " "),
				"as created by 20240101120000_create_payments.sql", n)
		}
	}
}

// TestInlineSquawkFindsNothing lints the inline migrations of every format:
// zero findings.
func TestInlineSquawkFindsNothing(t *testing.T) {
	var files []string
	for _, format := range Formats() {
		dir := owned(inlineScenario(t, format))
		written := writeDir(t, dir)
		for n := range dir {
			if strings.HasSuffix(n, ".sql") {
				files = append(files, filepath.Join(written, n))
			}
		}
	}
	for _, f := range squawk(t, files...) {
		t.Errorf("%s:%d: %s: %s", filepath.Base(f.File), f.Line, f.Rule, f.Message)
	}
}

// TestInlineOnlyPlansNoLedger: when every method is inline, no ledger
// migration is planned; the inline columns and index still are, and a ledger
// migration already in the directory is kept.
func TestInlineOnlyPlansNoLedger(t *testing.T) {
	for _, format := range Formats() {
		cfg := inlineCfg(format)
		cfg.Methods, cfg.NoLedger = nil, true
		out, err := Plan(cfg, userFiles(format))
		require.NoError(t, err)
		var all strings.Builder
		for n, b := range out {
			all.WriteString(n + "\n" + string(b))
		}
		assert.NotContains(t, all.String(), "idempotency_keys", "%s: no ledger table", format)
		assert.Contains(t, all.String(), "CREATE UNIQUE INDEX CONCURRENTLY", "%s: the inline index", format)

		withLedger := inlineScenario(t, format)
		again, err := Plan(cfg, withLedger)
		require.NoError(t, err)
		assert.Equal(t, owned(withLedger), again, "%s: existing ledger migrations are kept, nothing new", format)
	}
}
