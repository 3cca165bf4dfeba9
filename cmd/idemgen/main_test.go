package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/testmod"
)

// TestMain lets the test binary act as idemgen: a symlink named idemgen to
// it, put on PATH, is what //go:generate idemgen runs in the end-to-end test.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "idemgen" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// toolPath returns a PATH whose first entry holds idemgen (this binary).
func toolPath(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.Symlink(exe, filepath.Join(bin, "idemgen")))
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// loadModule reads a txtar of module files from testdata/e2e.
func loadModule(t *testing.T, name string) map[string][]byte {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join(testmod.RepoRoot(t), "testdata", "e2e", name+".txtar"))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range ar.Files {
		files[f.Name] = f.Data
	}
	return files
}

// shopModule writes testdata/e2e/shop.txtar as a fresh module. Its mail
// package uses "go tool idemgen", which needs the tool directive.
func shopModule(t *testing.T) string {
	t.Helper()
	dir := testmod.New(t, "shop", loadModule(t, "shop"))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), append(gomod, "\ntool github.com/idemgen/idemgen/cmd/idemgen\n"...), 0o644))
	return dir
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

func sh(t testing.TB, dir, path string, env []string, name string, args ...string) result {
	t.Helper()
	if name == "idemgen" { // exec.Command searches this process's PATH, not env's
		name = filepath.Join(filepath.SplitList(path)[0], name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

func mtimes(t *testing.T, paths ...string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, p := range paths {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		out = append(out, fi.ModTime())
	}
	return out
}

// TestEndToEnd is the new user's path, in a fresh module outside the
// repository: go generate, a second run that changes nothing, -check clean,
// the generated and hand-written tests green against real PostgreSQL, a
// changed request type caught by -check with a diff, and a bad annotation
// reported at its position with exit status 1.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	dir := shopModule(t)
	path := toolPath(t)
	pkg := filepath.Join(dir, "payments")
	outputs := []string{
		filepath.Join(pkg, "idem_gen.go"),
		filepath.Join(pkg, "idem_gen_test.go"),
		filepath.Join(pkg, "migrations", "00001_idemgen_create_idempotency_keys.sql"),
		filepath.Join(dir, "mail", "idem_gen.go"),
		filepath.Join(dir, "sms", "idem_gen.go"),
	}

	r := sh(t, dir, path, nil, "go", "generate", "./...")
	require.Equal(t, 0, r.code, "go generate: %s", r.stderr)
	before := mtimes(t, outputs...)
	first := map[string][]byte{}
	for _, p := range outputs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		first[p] = b
	}

	// A second run sees the stamp and touches nothing.
	time.Sleep(10 * time.Millisecond)
	r = sh(t, dir, path, nil, "go", "generate", "./...")
	require.Equal(t, 0, r.code, "second go generate: %s", r.stderr)
	assert.Equal(t, before, mtimes(t, outputs...), "a second go generate rewrote files")

	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	require.Equal(t, 0, r.code, "idemgen -check after generate: %s%s", r.stdout, r.stderr)

	// Deterministic: regenerating from scratch gives the same bytes.
	for _, p := range outputs {
		require.NoError(t, os.Remove(p))
	}
	r = sh(t, dir, path, nil, "idemgen", "./...")
	require.Equal(t, 0, r.code, "idemgen ./...: %s", r.stderr)
	for _, p := range outputs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, string(first[p]), string(b), "%s differs between runs", p)
	}

	// The generated tests and the hand-written twin test, against a real
	// PostgreSQL through the generated wrapper.
	r = sh(t, dir, path, nil, "go", "vet", "./...")
	require.Equal(t, 0, r.code, "go vet: %s", r.stderr)
	r = sh(t, dir, path, nil, "go", "test", "-count=1", "-v", "./...")
	require.Equal(t, 0, r.code, "go test in the generated module:\n%s%s", r.stdout, r.stderr)
	for _, name := range []string{
		"TestIdempotentPaymentsCharge/twins", "TestIdempotentPaymentsCharge/storm",
		"TestIdempotentPaymentsCharge/same_key,_different_request", "TestIdempotentPaymentsCharge/expired_key",
		"TestIdempotentPaymentsCharge/failing_body_leaves_no_claim",
		"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover", "TestTwinsThroughWrapper",
	} {
		assert.Contains(t, r.stdout, "--- PASS: "+name, "generated test did not pass")
	}

	// Change the request type: -check fails with a diff and says what to do.
	src := filepath.Join(pkg, "payments.go")
	orig, err := os.ReadFile(src)
	require.NoError(t, err)
	changed := strings.Replace(string(orig), "\tAmount  int64\n\tMemo", "\tAmount  int64\n\tNote    string\n\tMemo", 1)
	require.NotEqual(t, string(orig), changed)
	require.NoError(t, os.WriteFile(src, []byte(changed), 0o644))
	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "--- a/payments/idem_gen.go\n+++ b/payments/idem_gen.go\n")
	assert.Contains(t, r.stdout, "+\tf.Field(\"Note\")\n")
	assert.Contains(t, r.stderr, "run go generate")
	require.NoError(t, os.WriteFile(src, orig, 0o644))

	// A hand edit is caught too.
	gofile := outputs[0]
	require.NoError(t, os.WriteFile(gofile, append(first[gofile], []byte("\n// edited\n")...), 0o644))
	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	assert.Equal(t, 1, r.code, "a hand-edited output must fail -check")
	require.NoError(t, os.WriteFile(gofile, first[gofile], 0o644))

	// A directive that is not on a method: file:line:col and exit status 1.
	bad := filepath.Join(pkg, "bad.go")
	require.NoError(t, os.WriteFile(bad, []byte("package payments\n\n//go:generate idemgen\nfunc Loose() {}\n"), 0o644))
	r = sh(t, pkg, path, []string{"GOFILE=bad.go", "GOLINE=3", "GOPACKAGE=payments"}, "idemgen")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "bad.go:3:1: this idemgen directive is not attached to a method")
	r = sh(t, dir, path, nil, "go", "generate", "./...")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "bad.go:3:1: this idemgen directive is not attached to a method")
}

// TestUsage checks the exit status of misuse.
func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	t.Setenv("GOFILE", "")
	assert.Equal(t, 2, run(context.Background(), nil, &out, &errb), "no packages")
	assert.Contains(t, errb.String(), "go tool idemgen")
	errb.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-retention=1h", "./..."}, &out, &errb), "directive flag on a package run")
	assert.Contains(t, errb.String(), "belongs in a //go:generate idemgen directive")
	errb.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-nope", "./..."}, &out, &errb))
	assert.Contains(t, errb.String(), "run idemgen -help for usage")
	errb.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-retention=abc", "./..."}, &out, &errb), "a bad value on a package run")
	assert.Contains(t, errb.String(), "-retention=abc: want a positive duration")
	assert.Contains(t, errb.String(), "belongs in a //go:generate idemgen directive")
	for _, help := range []string{"-h", "-help", "--help"} {
		out.Reset()
		errb.Reset()
		assert.Equal(t, 0, run(context.Background(), []string{help}, &out, &errb), help)
		assert.Contains(t, out.String(), "Retention and locks (per method):", "%s prints the usage to stdout", help)
		assert.Empty(t, errb.String(), help)
	}
	out.Reset()
	t.Setenv("GOFILE", "x.go")
	t.Setenv("GOLINE", "7")
	errb.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-retention=soon"}, &out, &errb))
	assert.Contains(t, errb.String(), "x.go:7: -retention=soon: want a positive duration")
}

// TestDebugModel prints the model built from the directives and writes
// nothing.
func TestDebugModel(t *testing.T) {
	dir := testmod.New(t, "model", map[string][]byte{"svc/svc.go": []byte(`package svc

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Svc is a service.
type Svc struct{}

// Req is a request.
type Req struct {
	Amount int64
	Trace  string ` + "`idem:\"-\"`" + `
}

// Do does it.
//
//go:generate idemgen -retention=2h -tests=false
func (s *Svc) Do(ctx context.Context, tx pgx.Tx, req Req) (int, error) { return 1, nil }
`)})
	t.Chdir(dir)
	t.Setenv("GOFILE", "")
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-debug-model", "./..."}, &out, &errb), errb.String())
	assert.NotContains(t, out.String(), dir, "paths are relative to the directory idemgen runs in")
	var pkgs []gen.Package
	require.NoError(t, json.Unmarshal(out.Bytes(), &pkgs))
	require.Len(t, pkgs, 1)
	m := pkgs[0].Receivers[0].Methods[0]
	assert.Equal(t, "Svc.Do", m.Key)
	assert.Equal(t, gen.ModeAtomic, m.Mode)
	assert.Equal(t, 2*time.Hour, m.Retention)
	assert.Equal(t, []string{"req.Amount"}, m.Fingerprinted)
	assert.Equal(t, []string{"req.Trace"}, m.Omitted)
	assert.Equal(t, []gen.Scalar{{Param: 0, Path: []string{"Amount"}, Kind: "int"}}, m.Scalars)
	_, err := os.Stat(filepath.Join(dir, "svc", "idem_gen.go"))
	assert.ErrorIs(t, err, os.ErrNotExist, "-debug-model must not write")
}

// TestSummary prints one line per package written, nothing when nothing
// changed, and nothing with -q.
func TestSummary(t *testing.T) {
	svc := []byte(`package svc

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -tests=false
func (s *Svc) Do(ctx context.Context, tx pgx.Tx, n int64) (int, error) { return 1, nil }
`)
	dir := testmod.New(t, "summary", map[string][]byte{"svc/svc.go": svc})
	t.Chdir(dir)
	t.Setenv("GOFILE", "")
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"./..."}, &out, &errb), errb.String())
	assert.Equal(t, "idemgen: example.com/summary/svc: wrote idem_gen.go, migrations/00001_idemgen_create_idempotency_keys.sql (1 method)\n", out.String())
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"./..."}, &out, &errb), errb.String())
	assert.Empty(t, out.String(), "nothing written, nothing said")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "svc", "svc.go"), bytes.Replace(svc, []byte("n int64"), []byte("n int32"), 1), 0o644))
	require.Equal(t, 0, run(context.Background(), []string{"-q", "./..."}, &out, &errb), errb.String())
	assert.Empty(t, out.String(), "-q")
	assert.Empty(t, errb.String(), "-q")
}

// TestInlineOrdinarySchema is a new user's inline method whose table keys a
// uuid column and whose request holds only strings: the generated tests
// apply the user's own migration with idemgen's, and the mismatch test
// varies the uuid into another valid uuid, so every generated subtest passes.
func TestInlineOrdinarySchema(t *testing.T) {
	t.Parallel()
	dir := testmod.New(t, "uuidorders", loadModule(t, "uuid_orders"))
	path := toolPath(t)
	r := sh(t, dir, path, nil, "idemgen", "./...")
	require.Equal(t, 0, r.code, "idemgen ./...: %s", r.stderr)
	test, err := os.ReadFile(filepath.Join(dir, "shop", "idem_gen_test.go"))
	require.NoError(t, err)
	assert.Contains(t, string(test), "a.CustomerID = idemtest.Vary(a.CustomerID)", "the only fingerprinted fields are strings: the first is varied")
	r = sh(t, dir, path, nil, "go", "test", "-count=1", "-v", "./...")
	require.Equal(t, 0, r.code, "go test in the generated module:\n%s%s", r.stdout, r.stderr)
	for _, name := range []string{"same_key,_different_request", "in_the_caller's_transaction", "sweep_keeps_live_keys", "expired_key"} {
		assert.Contains(t, r.stdout, "--- PASS: TestIdempotentShopCreateOrder/"+name)
	}
}

// TestStaleWrapperFirstError: a method or a request type changed without
// go generate fails the build, and the compiler's first error names the
// guard (runGoGenerate…, which says what to do), not the wrapper's broken
// call: the guards come first in idem_gen.go.
func TestStaleWrapperFirstError(t *testing.T) {
	t.Parallel()
	dir := shopModule(t)
	path := toolPath(t)
	r := sh(t, dir, path, nil, "idemgen", "./payments")
	require.Equal(t, 0, r.code, "idemgen: %s", r.stderr)
	src := filepath.Join(dir, "payments", "payments.go")
	orig, err := os.ReadFile(src)
	require.NoError(t, err)
	for _, c := range []struct{ name, old, new, guard string }{
		{"signature", "func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest) (Receipt, error) {",
			"func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest, note string) (Receipt, error) {", "runGoGeneratePaymentsCharge"},
		{"request field", "\tAmount  int64\n\tMemo", "\tCents   int64\n\tMemo", "runGoGenerateChargeRequestFields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := strings.Replace(string(orig), c.old, c.new, 1)
			require.NotEqual(t, string(orig), changed)
			require.NoError(t, os.WriteFile(src, []byte(changed), 0o644))
			defer func() { require.NoError(t, os.WriteFile(src, orig, 0o644)) }()
			r := sh(t, dir, path, nil, "go", "build", "./payments")
			require.NotEqual(t, 0, r.code)
			var first string
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, ".go:") {
					first = line
					break
				}
			}
			t.Logf("first error: %s", first)
			assert.Contains(t, first, "idem_gen.go", "the first error is in the generated file:\n%s", r.stderr)
			assert.Contains(t, first, c.guard, "the first error names the guard:\n%s", r.stderr)
		})
	}
}

// TestMissingFixtureFirstError: a fixture deleted after the tests were
// generated fails the test build first in idem_gen_test.go, on a line
// whose comment above declares it.
func TestMissingFixtureFirstError(t *testing.T) {
	t.Parallel()
	dir := shopModule(t)
	path := toolPath(t)
	r := sh(t, dir, path, nil, "idemgen", "./payments")
	require.Equal(t, 0, r.code, "idemgen: %s", r.stderr)
	fixtures := filepath.Join(dir, "payments", "fixtures_test.go")
	orig, err := os.ReadFile(fixtures)
	require.NoError(t, err)
	const sample = "func samplePaymentsChargeArgs(t *testing.T) (req ChargeRequest) {\n\treturn ChargeRequest{Account: \"acct-1\", Amount: 1250, Memo: \"first\"}\n}\n"
	require.Contains(t, string(orig), sample)
	require.NoError(t, os.WriteFile(fixtures, []byte(strings.Replace(string(orig), sample, "", 1)), 0o644))
	r = sh(t, dir, path, nil, "go", "vet", "./payments")
	require.NotEqual(t, 0, r.code)
	var first string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, ".go:") {
			first = line
			break
		}
	}
	assert.Contains(t, first, "idem_gen_test.go:", "the first error is in the generated tests:\n%s", r.stderr)
	assert.Contains(t, first, "undefined: samplePaymentsChargeArgs")
	var lineNo int
	_, err = fmt.Sscanf(first[strings.Index(first, "idem_gen_test.go:")+len("idem_gen_test.go:"):], "%d", &lineNo)
	require.NoError(t, err, first)
	src, err := os.ReadFile(filepath.Join(dir, "payments", "idem_gen_test.go"))
	require.NoError(t, err)
	lines := strings.Split(string(src), "\n")
	require.Greater(t, lineNo, 1)
	assert.Equal(t, "\t// func samplePaymentsChargeArgs(t *testing.T) (req ChargeRequest)", lines[lineNo-2], "the line above declares the fixture")
}

// TestSQLTxEndToEnd is a new user's module on database/sql (methods that
// take a *sql.Tx, an external one on the same store, an inline one): go
// generate, -check clean, and the generated tests, which build their stores
// with idem.NewSQLStore over db.SQL, green against a real PostgreSQL, with
// a hand-written test through the HTTP middleware.
func TestSQLTxEndToEnd(t *testing.T) {
	t.Parallel()
	dir := testmod.New(t, "sqltx", loadModule(t, "sqltx"))
	path := toolPath(t)
	r := sh(t, dir, path, nil, "idemgen", "./...")
	require.Equal(t, 0, r.code, "idemgen ./...: %s", r.stderr)
	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	require.Equal(t, 0, r.code, "idemgen -check after generate: %s%s", r.stdout, r.stderr)
	test, err := os.ReadFile(filepath.Join(dir, "bank", "idem_gen_test.go"))
	require.NoError(t, err)
	assert.Contains(t, string(test), "idem.NewSQLStore(db.SQL, opts...)")
	r = sh(t, dir, path, nil, "go", "vet", "./...")
	require.Equal(t, 0, r.code, "go vet: %s", r.stderr)
	r = sh(t, dir, path, nil, "go", "test", "-count=1", "-v", "./...")
	require.Equal(t, 0, r.code, "go test in the generated module:\n%s%s", r.stdout, r.stderr)
	for _, name := range []string{
		"TestIdempotentBankTransfer/storm", "TestIdempotentBankTransfer/same_key,_different_request",
		"TestIdempotentBankTransfer/final_error_ErrInsufficient", "TestIdempotentBankTransfer/in_the_caller's_transaction",
		"TestIdempotentBankTransfer/failing_body_in_the_caller's_transaction", "TestIdempotentBankClose/twins",
		"TestIdempotentBankNotify/crash_mid-work,_then_takeover", "TestIdempotentShopCreateOrder/in_the_caller's_transaction",
		"TestIdempotentShopCreateOrder/body_that_forgets_the_key", "TestHTTPOnSQLStore",
	} {
		assert.Contains(t, r.stdout, "--- PASS: "+name, "generated test did not pass")
	}
}
