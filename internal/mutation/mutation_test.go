// Package mutation proves that the generated twin-request tests earn their
// place: each test here breaks one guarantee of runtime/idem in a copy of its
// source, runs the generated tests of the example package against the broken
// runtime with go test -overlay, and asserts that named generated tests fail.
// The repository's sources are never touched.
package mutation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envChild marks the go test processes this package starts. They run only
// the example package, so this package never runs inside itself; the marker
// makes that explicit should a child ever be pointed at ./... .
const envChild = "IDEMGEN_MUTATION_CHILD"

// target is the package whose generated tests are run, and runPattern picks
// the generated tests (TestIdempotent<Type><Method>) out of it, leaving the
// example's own slower end-to-end test out.
const (
	target     = "./example/"
	runPattern = "^TestIdempotent"
)

// edit replaces text in one file of runtime/idem. old must occur exactly
// once, so a refactor of the runtime fails the test instead of silently
// testing an unmutated copy.
type edit struct {
	file     string // file name in runtime/idem
	old, new string
}

// mutation is one realistic bug that breaks a guarantee.
type mutation struct {
	name  string
	bug   string // what a developer would have written, in one sentence
	edits []edit
	// caught maps generated subtests that must fail under the mutation to
	// what their failure must show.
	caught map[string]expect
}

// expect is how a generated subtest must fail.
type expect struct {
	// why must match the subtest's output: the assertion that shows why it
	// failed, not just that something did.
	why *regexp.Regexp
	// racy marks a subtest that sees the bug only when concurrent requests
	// really overlap in the database, which the scheduler does not promise on
	// every run. If it passes in the full run it is run again alone, up to
	// raceAttempts times, until it fails.
	racy bool
}

// raceAttempts bounds the extra runs of a racy subtest.
const raceAttempts = 10

// must and racy build expectations.
func must(why *regexp.Regexp) expect { return expect{why: why} }
func racy(why *regexp.Regexp) expect { return expect{why: why, racy: true} }

// Failure messages of the generated tests (example/idem_gen_test.go).
var (
	// More than one execution for one key.
	ranTwiceOrMore = regexp.MustCompile(`the method body ran ([2-9]|\d\d+) times, want 1`)
	ranTwice       = regexp.MustCompile(`the method body ran 2 times, want 1`)
	// A replay after a takeover ran the body again.
	ranThrice = regexp.MustCompile(`the method body ran 3 times, want 2`)
	// More than one ledger row for one key.
	rowsTwoOrMore = regexp.MustCompile(`the ledger holds ([2-9]|\d\d+) rows for \S*Payments\.\w+, want 1`)
	// Another request's stored response was replayed, without an error.
	replayedOther = regexp.MustCompile(`same key, different request: got error <nil>, want idem\.ErrMismatch`)
	// A claim hit the unique index and failed instead of replaying.
	duplicateKey = regexp.MustCompile(`duplicate key value violates unique constraint "idempotency_keys_pkey"`)
	// A retry ran while the crashed attempt held the key.
	notInProgress = regexp.MustCompile(`retry while the crashed attempt holds the key: got error <nil>, want idem\.ErrInProgress`)
)

// The unique index: the primary key written by CREATE TABLE (ledger/ledger.go).
var primaryKey = edit{"ledger/ledger.go",
	"\tfor _, c := range l.Columns {\n" +
		"\t\tfmt.Fprintf(&b, \"    %s,\\n\", c.Def())\n" +
		"\t}\n" +
		"\tfmt.Fprintf(&b, \"    CONSTRAINT %s PRIMARY KEY (%s)\\n)\", Quote(l.PrimaryKeyName()), quoteList(l.Key))\n",
	"\tfor i, c := range l.Columns {\n" +
		"\t\tif i > 0 {\n" +
		"\t\t\tb.WriteString(\",\\n\")\n" +
		"\t\t}\n" +
		"\t\tb.WriteString(\"    \" + c.Def())\n" +
		"\t}\n" +
		"\tb.WriteString(\"\\n)\")\n",
}

// The atomic claim's conflict clause (queries.go): a key some row holds is
// not claimed, and the read in the same round trip answers from that row.
const claimConflict = "ON CONFLICT (scope, method, key) DO NOTHING\nRETURNING fence`"

// The atomic takeover's condition (queries.go): only an expired row.
const takeoverExpiredOnly = "WHERE %[3]s AND %[4]s\nRETURNING fence`"

// The external claim's conflict clause (queries.go).
const externalConflict = "ON CONFLICT (scope, method, key) DO UPDATE\n" +
	"SET status = 'in_progress', fence = t.fence + 1, locked_until = excluded.locked_until,\n" +
	"    fingerprint = excluded.fingerprint, response = NULL, error_name = NULL, error_message = NULL,\n" +
	"    steps = CASE WHEN %[3]s THEN '{}'::jsonb ELSE t.steps END,\n" +
	"    created_at = CASE WHEN %[3]s THEN excluded.created_at ELSE t.created_at END,\n" +
	"    expires_at = greatest(CASE WHEN %[3]s THEN excluded.expires_at ELSE t.expires_at END, excluded.locked_until),\n" +
	"    intention = CASE WHEN %[3]s THEN excluded.intention ELSE t.intention END\n" +
	"WHERE %[3]s\n" +
	"   OR (t.status = 'in_progress' AND t.fingerprint = excluded.fingerprint AND t.locked_until <= %[2]s)\n" +
	"RETURNING fence, steps, intention, t.fence > 1 AS taken_over`"

// The fingerprint comparison in settle (call.go).
const fingerprintCheck = "\tif string(r.fingerprint) != string(c.fp) {\n" +
	"\t\ts.hook(ctx, s.cfg.hooks.Mismatch, c.event())\n" +
	"\t\ts.cfg.logger.WarnContext(ctx, \"idempotency key reused with a different request\",\n" +
	"\t\t\t\"method\", c.method, \"scope\", c.scope, \"key\", c.key,\n" +
	"\t\t\t\"stored\", shortHex(r.fingerprint), \"got\", shortHex(c.fp))\n" +
	"\t\treturn zero, &MismatchError{Method: c.method, Key: c.key, Stored: r.fingerprint, Got: c.fp}\n" +
	"\t}\n"

// The read that answers a key the claim did not get (atomic.go).
const replayRead = "\tcase !r.expired:\n\t\treplayed = true\n"

// mutations are the broken guarantees the generated tests must catch. Each is
// a bug a developer could write, made from the runtime's real source text.
func mutations() []mutation {
	return []mutation{
		{
			name: "a_no_unique_index",
			bug: "the ledger's primary key is dropped, and the claims become plain INSERTs " +
				"(ON CONFLICT needs a unique index to infer): nothing stops a second row for the same key",
			edits: []edit{
				primaryKey,
				{"queries.go", claimConflict, "RETURNING fence`"},
				{"queries.go", externalConflict, "RETURNING fence, steps, intention, t.fence > 1 AS taken_over`"},
			},
			caught: map[string]expect{
				// Both modes claim first: every twin inserts its own row.
				"TestIdempotentPaymentsCharge/twins":                         must(ranTwice),
				"TestIdempotentPaymentsCharge/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsRefund/twins":                         must(ranTwice),
				"TestIdempotentPaymentsRefund/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsPayout/twins":                         must(ranTwice),
				"TestIdempotentPaymentsPayout/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsPayout/expired_key":                   must(rowsTwoOrMore),
				"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover": must(notInProgress),
			},
		},
		{
			name: "b_fingerprint_not_compared",
			bug:  "settle replays the stored response without comparing the stored fingerprint with the request's",
			edits: []edit{
				{"call.go", fingerprintCheck, ""},
			},
			caught: map[string]expect{
				"TestIdempotentPaymentsCharge/same_key,_different_request": must(replayedOther),
				"TestIdempotentPaymentsRefund/same_key,_different_request": must(replayedOther),
				"TestIdempotentPaymentsPayout/same_key,_different_request": must(replayedOther),
			},
		},
		{
			name: "c1_claim_always_wins",
			bug: "the claim is an upsert that always wins: a key another request holds is claimed again, " +
				"so the insert's conflict no longer decides who runs the body",
			edits: []edit{
				{"queries.go", claimConflict, "ON CONFLICT (scope, method, key) DO UPDATE SET fence = " +
					"%[1]s.fence + 1\nRETURNING fence`"},
			},
			caught: map[string]expect{
				"TestIdempotentPaymentsCharge/twins": must(ranTwice),
				"TestIdempotentPaymentsCharge/storm": must(ranTwiceOrMore),
				"TestIdempotentPaymentsRefund/twins": must(ranTwice),
				"TestIdempotentPaymentsRefund/storm": must(ranTwiceOrMore),
			},
		},
		{
			name: "c2_plain_insert",
			bug: "the claim is a plain INSERT: a twin that comes while the first holds the key hits the " +
				"unique index and fails instead of replaying",
			edits: []edit{
				{"queries.go", claimConflict, "RETURNING fence`"},
			},
			caught: map[string]expect{
				"TestIdempotentPaymentsCharge/twins": must(duplicateKey),
				"TestIdempotentPaymentsCharge/storm": must(duplicateKey),
				"TestIdempotentPaymentsRefund/twins": must(duplicateKey),
				"TestIdempotentPaymentsRefund/storm": must(duplicateKey),
				// An expired row is still there: the INSERT cannot take it over.
				"TestIdempotentPaymentsCharge/expired_key": must(duplicateKey),
				"TestIdempotentPaymentsRefund/expired_key": must(duplicateKey),
			},
		},
		{
			name: "d_response_not_replayed",
			bug: "a done row is treated as absent: the read skips it and the claim takes it over, " +
				"so the stored response is never replayed and every retry runs the body again",
			edits: []edit{
				{"atomic.go", replayRead, "\tcase !r.expired && r.status != StatusDone:\n\t\treplayed = true\n"},
				{"queries.go", takeoverExpiredOnly, "WHERE %[3]s AND (%[4]s OR t.status = 'done')\nRETURNING fence`"},
				{"queries.go", "WHERE %[3]s\n   OR (t.status = 'in_progress'",
					"WHERE %[3]s OR t.status = 'done'\n   OR (t.status = 'in_progress'"},
				// An external claim that lost to a row which is done by the
				// time it reads it claims again instead of replaying.
				{"external.go", "\tif !found || r.expired {\n\t\treturn nil, zero, errRowVanished\n",
					"\tif !found || r.expired || r.status == StatusDone {\n\t\treturn nil, zero, errRowVanished\n"},
			},
			caught: map[string]expect{
				"TestIdempotentPaymentsCharge/twins":                         must(ranTwice),
				"TestIdempotentPaymentsCharge/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsCharge/same_key,_different_request":   must(ranTwice),
				"TestIdempotentPaymentsRefund/twins":                         must(ranTwice),
				"TestIdempotentPaymentsRefund/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsRefund/same_key,_different_request":   must(ranTwice),
				"TestIdempotentPaymentsPayout/twins":                         must(ranTwice),
				"TestIdempotentPaymentsPayout/storm":                         must(ranTwiceOrMore),
				"TestIdempotentPaymentsPayout/same_key,_different_request":   must(ranTwice),
				"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover": must(ranThrice),
			},
		},
	}
}

// packageName is the package of a file of runtime/idem, named relative to it.
func packageName(file string) string {
	if dir := filepath.Dir(file); dir != "." {
		return filepath.Base(dir)
	}
	return "idem"
}

// unchanged is the control: unchanged copies of every file the mutations
// touch, overlaid the same way, so a mutated run differs from the control by
// the mutation's edits alone.
func unchanged(ms []mutation) mutation {
	c := mutation{name: "control"}
	seen := map[string]bool{}
	for _, m := range ms {
		for _, e := range m.edits {
			if !seen[e.file] {
				seen[e.file] = true
				clause := "package " + packageName(e.file) + "\n"
				c.edits = append(c.edits, edit{e.file, clause, clause})
			}
		}
	}
	return c
}

// result is one go test run of the generated tests.
type result struct {
	passed  bool
	ran     []string          // every test and subtest that finished, once per run of it
	failed  []string          // those that failed, once per failure
	output  map[string]string // each test's own output, all its runs
	build   string            // build output and anything not from a test
	elapsed time.Duration
}

// repoRoot returns the module root, two directories above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "module root")
	require.Contains(t, string(mod), "module github.com/idemgen/idemgen\n", "module root")
	return root
}

// run selects generated tests and how often to run them.
type run struct {
	pattern  string // go test -run
	count    int    // go test -count
	failFast bool   // stop at the first failure
}

// all is one run of every generated test.
var all = run{pattern: runPattern, count: 1}

// until runs the generated subtest name (Test/sub) up to n times, stopping
// at its first failure.
func until(name string, n int) run {
	test, sub, _ := strings.Cut(name, "/")
	return run{pattern: "^" + regexp.QuoteMeta(test) + "$/^" + regexp.QuoteMeta(sub) + "$", count: n, failFast: true}
}

// runGenerated runs the example's generated tests (with the overlay file, if
// not empty) and parses go test -json's events. The child runs without -race
// and without vet: it only has to tell passing from failing tests.
func runGenerated(t *testing.T, root, overlay string, sel run) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := []string{"test", "-json", "-vet=off", "-timeout=4m", "-count=" + strconv.Itoa(sel.count), "-run", sel.pattern}
	if sel.failFast {
		args = append(args, "-failfast")
	}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, target)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), envChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{elapsed: time.Since(start), output: map[string]string{}}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		require.NoError(t, err, "run go %s", strings.Join(args, " "))
	}
	r.passed = err == nil

	var build strings.Builder
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			build.WriteString(sc.Text() + "\n")
			continue
		}
		switch {
		case ev.Action == "build-output":
			build.WriteString(ev.Output)
		case ev.Test == "":
			if ev.Action == "output" {
				build.WriteString(ev.Output)
			}
		case ev.Action == "output":
			r.output[ev.Test] += ev.Output
		case ev.Action == "pass" || ev.Action == "fail":
			r.ran = append(r.ran, ev.Test)
			if ev.Action == "fail" {
				r.failed = append(r.failed, ev.Test)
			}
		}
	}
	require.NoError(t, sc.Err(), "read go test -json output")
	build.WriteString(stderr.String())
	r.build = build.String()
	sort.Strings(r.ran)
	sort.Strings(r.failed)
	return r
}

// leaves returns the subtests among names (dropping parents of subtests).
func leaves(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.Contains(n, "/") {
			out = append(out, n)
		}
	}
	return out
}

// mutate writes the mutated copies of m's files and the overlay that swaps
// them in under dir, and returns the overlay's path. Every edit must match
// exactly once in the text it is applied to (earlier edits of the same file
// included).
func mutate(t *testing.T, root, dir string, m mutation) string {
	t.Helper()
	texts := map[string]string{}
	var order []string
	for _, e := range m.edits {
		text, ok := texts[e.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, "runtime", "idem", e.file))
			require.NoError(t, err)
			text = string(b)
			order = append(order, e.file)
		}
		require.Equalf(t, 1, strings.Count(text, e.old),
			"mutation %s no longer applies to runtime/idem/%s: the text it replaces is gone or ambiguous; update the mutation to the runtime's new source:\n%s",
			m.name, e.file, e.old)
		texts[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	replace := map[string]string{}
	for _, f := range order {
		path := filepath.Join(dir, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(texts[f]), 0o644))
		replace[filepath.Join(root, "runtime", "idem", f)] = path
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	require.NoError(t, err)
	path := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(path, overlay, 0o644))
	return path
}

// failureReport is a run's failing tests with their output, for messages.
func failureReport(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "failed: %v\n", r.failed)
	for _, name := range leaves(r.failed) {
		fmt.Fprintf(&b, "--- %s\n%s", name, r.output[name])
	}
	if r.build != "" {
		fmt.Fprintf(&b, "--- build and package output\n%s", r.build)
	}
	return b.String()
}

// TestMutationsApply checks, without a database, that every mutation still
// matches the runtime's source exactly once per edit and that the mutated
// runtime still builds (a mutation that cannot build proves nothing).
func TestMutationsApply(t *testing.T) {
	root := repoRoot(t)
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			require.NotEmpty(t, m.edits)
			require.NotEmpty(t, m.caught)
			dir := t.TempDir()
			overlay := mutate(t, root, dir, m)
			b, err := os.ReadFile(overlay)
			require.NoError(t, err)
			var o struct{ Replace map[string]string }
			require.NoError(t, json.Unmarshal(b, &o))
			for orig := range o.Replace {
				assert.FileExists(t, orig)
			}
			build := exec.Command("go", "build", "-overlay="+overlay, "./runtime/idem/")
			build.Dir = root
			out, err := build.CombinedOutput()
			require.NoErrorf(t, err, "the mutated runtime does not build:\n%s", out)
		})
	}
}

// TestGeneratedTestsCatchMutations runs the example's generated tests once
// against the runtime as it is, overlaid by unchanged copies (they must pass,
// so any later failure is the mutation's doing), and once per mutation, and asserts that the named
// generated subtests fail for the named reason.
func TestGeneratedTestsCatchMutations(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Logf("%s is set: this is a go test started by this test, which does not run itself again", envChild)
		return
	}
	root := repoRoot(t)
	start := time.Now()

	control := runGenerated(t, root, mutate(t, root, t.TempDir(), unchanged(mutations())), all)
	require.Truef(t, control.passed, "the generated tests must pass against the unmutated runtime\n%s", failureReport(control))
	generated := leaves(control.ran)
	require.NotEmpty(t, generated, "no generated subtests ran:\n%s", control.build)
	t.Logf("control: all %d generated subtests passed in %s", len(generated), control.elapsed.Round(100*time.Millisecond))

	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			t.Log("bug: " + m.bug)
			for name := range m.caught {
				require.Containsf(t, generated, name, "%s names a generated subtest the control run did not run", m.name)
			}
			overlay := mutate(t, root, t.TempDir(), m)
			r := runGenerated(t, root, overlay, all)
			caught := leaves(r.failed)
			if r.passed {
				// Only a race can hide the bug from a whole run; the racy
				// subtests are run again below.
				require.Truef(t, slices.ContainsFunc(slices.Collect(maps.Values(m.caught)), func(e expect) bool { return e.racy }),
					"the generated tests passed with the mutation applied: they do not catch it\n%s", r.build)
			} else {
				require.NotEmptyf(t, caught, "the run failed but no generated subtest did (did the mutated runtime build?)\n%s", r.build)
			}
			var notes []string
			for _, name := range slices.Sorted(maps.Keys(m.caught)) {
				e := m.caught[name]
				failed, out, when := slices.Contains(caught, name), r.output[name], "in the full run"
				report := failureReport(r)
				if !failed && e.racy {
					again := runGenerated(t, root, overlay, until(name, raceAttempts))
					runs := 0
					for _, n := range again.ran {
						if n == name {
							runs++
						}
					}
					failed, out = slices.Contains(again.failed, name), again.output[name]
					report += fmt.Sprintf("--- %d runs of %s alone\n%s", runs, name, failureReport(again))
					when = fmt.Sprintf("passed the full run, failed on run %d of at most %d alone", runs, raceAttempts)
				}
				if !assert.Truef(t, failed, "expected %s to catch the mutation (racy: %v)\n%s", name, e.racy, report) {
					continue
				}
				if assert.Regexpf(t, e.why, out, "%s failed, but not for the expected reason", name) {
					notes = append(notes, fmt.Sprintf("%s %s: %s", name, when, e.why.FindString(out)))
				}
			}
			t.Logf("the full run took %s; generated subtests that failed in it:\n  %s", r.elapsed.Round(100*time.Millisecond),
				strings.Join(caught, "\n  "))
			t.Logf("expected catches:\n  %s", strings.Join(notes, "\n  "))
			if testing.Verbose() {
				t.Logf("their failures:\n%s", failureReport(r))
			}
		})
	}
	t.Logf("the control run and the mutations took %s", time.Since(start).Round(100*time.Millisecond))
}
