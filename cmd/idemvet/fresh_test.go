package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestFreshModule runs idemvet as a user does, go vet -vettool over a fresh
// module (testdata/fresh.txtar), and holds its diagnostics equal to the
// case's stderr section; then again with every mistake mended, which must
// print nothing.
func TestFreshModule(t *testing.T) {
	ar, err := txtar.ParseFile(filepath.Join("testdata", "fresh.txtar"))
	require.NoError(t, err)
	files := map[string][]byte{}
	var want string
	for _, f := range ar.Files {
		if f.Name == "stderr" {
			want = string(f.Data)
			continue
		}
		files[f.Name] = f.Data
	}
	tool := filepath.Join(t.TempDir(), "idemvet")
	// -trimpath: the binary is the same wherever the checkout is, so the
	// facts go vet caches for the module's dependencies, keyed by the vet
	// tool's content, serve every clone of the same source.
	build := exec.Command("go", "build", "-trimpath", "-o", tool, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	dir := testmod.New(t, "fresh", files)
	got, code := vet(t, dir, tool)
	assert.Equal(t, 1, code, "go vet exits 1 on diagnostics")
	assert.Equal(t, want, got)

	mended := map[string][]byte{}
	for name, b := range files {
		s := string(b)
		s = strings.Replace(s, "receipt, err = p.Charge(r.Context(), tx, req)",
			"//idem:bypass-ok this handler is the test's point\n\t\t\treceipt, err = p.Charge(r.Context(), tx, req)", 1)
		s = strings.Replace(s, "var lastErr error\n", "var lastErr error\n\tkey := rand.Text()\n", 1)
		s = strings.Replace(s, `req.Header.Set("Idempotency-Key", rand.Text())`, `req.Header.Set("Idempotency-Key", key)`, 1)
		s = strings.Replace(s, "INSERT INTO deposits (account, amount_cents) VALUES ($1, $2)",
			"INSERT INTO deposits (account, amount_cents, idempotency_key) VALUES ($1, $2, $3)", 1)
		mended[name] = []byte(s)
	}
	dir = testmod.New(t, "fresh", mended)
	got, code = vet(t, dir, tool)
	assert.Equal(t, 0, code, "go vet: %s", got)
	assert.Empty(t, got)
}

// vet runs go vet -vettool=tool ./... in dir and returns its diagnostics,
// sorted, one a line, and its exit code.
func vet(t *testing.T, dir, tool string, flags ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"vet", "-vettool=" + tool}, flags...), "./...")...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "go: ") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		return "", code
	}
	return strings.Join(lines, "\n") + "\n", code
}
