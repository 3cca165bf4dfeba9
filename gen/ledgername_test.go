package gen

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testmod"
)

// sameNameModule writes testdata/e2e/samename.txtar as a fresh module:
// users.Service.Create and orders.Service.Create, and a test that sends one
// key to both through one ledger.
func sameNameModule(t *testing.T) string {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join(testmod.RepoRoot(t), "testdata", "e2e", "samename.txtar"))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range ar.Files {
		files[f.Name] = f.Data
	}
	return testmod.New(t, "samename", files)
}

// TestLedgerNameHasImportPath: two packages with the same receiver and
// method name generate two ledger names, each with its import path.
func TestLedgerNameHasImportPath(t *testing.T) {
	dir := sameNameModule(t)
	out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}, Force: true})
	require.NoError(t, err)
	var names []string
	for _, p := range out.Packages {
		for _, r := range p.Receivers {
			for _, m := range r.Methods {
				assert.Equal(t, "Service.Create", m.Key)
				names = append(names, m.Ledger)
			}
		}
	}
	assert.Equal(t, []string{"example.com/samename/orders.Service.Create", "example.com/samename/users.Service.Create"}, names)
	src := string(out.Files[filepath.Join(dir, "users", GoFile)])
	assert.Contains(t, src, `Name: "example.com/samename/users.Service.Create"`)
}

// TestSameNameNoCrossReplay generates the two packages and runs the
// module's own test against a real PostgreSQL: one key sent to
// users.Service.Create and to orders.Service.Create in one scope runs each
// once, and neither replays the other's response.
func TestSameNameNoCrossReplay(t *testing.T) {
	t.Parallel()
	dir := sameNameModule(t)
	out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}, Force: true})
	require.NoError(t, err)
	for p, b := range out.Files {
		_, err := WriteFile(p, b)
		require.NoError(t, err)
	}
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestSameNameNoCrossReplay$", "-v", "./orders")
	cmd.Dir = dir
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in the generated module:\n%s", outb)
	assert.Contains(t, string(outb), "--- PASS: TestSameNameNoCrossReplay")
}

// TestLedgerNameFromFiles: idemgen run on files rather than a package has
// no import path to name the method by, and says so.
func TestLedgerNameFromFiles(t *testing.T) {
	dir := sameNameModule(t)
	require.NoError(t, os.Remove(filepath.Join(dir, "orders", "samename_test.go")))
	_, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./orders/orders.go"}, Force: true})
	var list ErrorList
	require.True(t, errors.As(err, &list), "got %v", err)
	assert.Contains(t, list.Error(), "orders/orders.go:19:1: Service.Create: package orders has no import path")
}
