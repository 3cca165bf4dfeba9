package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// edit replaces source text in one file of runtime/idem.
type edit struct {
	file     string
	old, new string
}

// mutation breaks one guarantee of the runtime. Its edits are applied with
// go test -overlay to copies, so the repository's sources are never touched.
type mutation struct {
	name  string
	edits []edit
	// caughtBy are generated tests that must fail under the mutation.
	caughtBy []string
}

// The atomic claim's conflict clause: a row is taken over only once expired.
const claimWhere = "    expires_at = excluded.expires_at, locked_until = NULL\nWHERE t.expires_at <= %[2]s\nRETURNING fence`"

var mutations = []mutation{
	{
		name: "a: ledger without a unique index",
		edits: []edit{{"schema.go",
			`fmt.Fprintf(&b, "    CONSTRAINT %s PRIMARY KEY (%s)\n)", quote(l.PrimaryKeyName()), quoteList(l.Key))`,
			`b.WriteString("    no_unique_index boolean\n)")`}},
		caughtBy: []string{
			"TestIdempotentPaymentsCharge/twins", "TestIdempotentPaymentsCharge/storm",
			"TestIdempotentPaymentsPayout/twins", "TestIdempotentPaymentsPayout/storm",
		},
	},
	{
		name: "b: fingerprint comparison skipped",
		edits: []edit{{"call.go",
			`if string(r.fingerprint) != string(c.fp) {`,
			`if false && string(r.fingerprint) != string(c.fp) {`}},
		caughtBy: []string{"TestIdempotentPaymentsCharge/same_key,_different_request", "TestIdempotentPaymentsPayout/same_key,_different_request"},
	},
	{
		// The read that precedes the claim decides: when it found no row,
		// the insert takes the key even if a twin inserted it meanwhile.
		name: "c: check-then-insert (the lookup decides, not the insert)",
		edits: []edit{{"queries.go", claimWhere,
			"    expires_at = excluded.expires_at, locked_until = NULL\nRETURNING fence`"}},
		caughtBy: []string{"TestIdempotentPaymentsCharge/storm"},
	},
	{
		// No stored response is ever replayed: every retry claims the row
		// again and runs the body again.
		name: "d: response not replayed, re-executed",
		edits: []edit{
			{"atomic.go", "\tif found && !r.expired {\n\t\treturn settle(ctx, s, m, c, r)", "\tif false && found && !r.expired {\n\t\treturn settle(ctx, s, m, c, r)"},
			{"queries.go", claimWhere, "    expires_at = excluded.expires_at, locked_until = NULL\nWHERE true OR t.expires_at <= %[2]s\nRETURNING fence`"},
		},
		caughtBy: []string{"TestIdempotentPaymentsCharge/twins", "TestIdempotentPaymentsCharge/storm", "TestIdempotentPaymentsCharge/same_key,_different_request"},
	},
}

// goTestFailures runs the generated tests of the module in dir and returns
// the tests that failed, and whether the run passed.
func goTestFailures(t *testing.T, dir, path string, extra ...string) ([]string, bool, string) {
	t.Helper()
	args := append([]string{"test", "-count=1", "-json", "-run", "^TestIdempotent"}, extra...)
	args = append(args, "./payments")
	r := sh(t, dir, path, nil, "go", args...)
	var failed []string
	var output strings.Builder
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Action == "fail" && ev.Test != "" {
			failed = append(failed, ev.Test)
		}
		if ev.Action == "output" && strings.Contains(ev.Output, "_test.go:") {
			output.WriteString(ev.Output)
		}
	}
	sort.Strings(failed)
	return failed, r.code == 0, output.String() + r.stderr
}

// TestGeneratedTestsCatchMutations proves the generated tests earn their
// place: they pass against the runtime as it is, and each mutation that
// breaks a guarantee makes named generated tests fail.
func TestGeneratedTestsCatchMutations(t *testing.T) {
	dir := shopModule(t)
	path := toolPath(t)
	r := sh(t, dir, path, nil, "go", "generate", "./...")
	require.Equal(t, 0, r.code, "go generate: %s", r.stderr)

	failed, ok, out := goTestFailures(t, dir, path)
	require.True(t, ok, "the generated tests must pass against the real runtime; failed: %v\n%s", failed, out)

	idemDir := filepath.Join(repoRoot(t), "runtime", "idem")
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			tmp := t.TempDir()
			replace := map[string]string{}
			for _, e := range m.edits {
				src := filepath.Join(idemDir, e.file)
				copyPath := filepath.Join(tmp, e.file)
				text, err := os.ReadFile(src)
				if prev, ok := replace[src]; ok { // a second edit of the same file
					text, err = os.ReadFile(prev)
				}
				require.NoError(t, err)
				require.Equal(t, 1, strings.Count(string(text), e.old), "mutation no longer applies to runtime/idem/%s: update it", e.file)
				require.NoError(t, os.WriteFile(copyPath, []byte(strings.Replace(string(text), e.old, e.new, 1)), 0o644))
				replace[src] = copyPath
			}
			overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
			require.NoError(t, err)
			overlayPath := filepath.Join(tmp, "overlay.json")
			require.NoError(t, os.WriteFile(overlayPath, overlay, 0o644))

			failed, ok, out := goTestFailures(t, dir, path, "-overlay="+overlayPath)
			require.False(t, ok, "the generated tests passed with the mutation applied\n%s", out)
			require.NotEmpty(t, failed, "the mutated runtime did not build:\n%s", out)
			for _, want := range m.caughtBy {
				assert.Contains(t, failed, want, "expected %s to catch the mutation", want)
			}
			t.Logf("caught by: %s", strings.Join(failed, ", "))
		})
	}
}
