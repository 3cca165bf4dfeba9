package gen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestStaleOutputDoesNotBlock: a wrappers file that no longer compiles is
// regenerated with one load.
func TestStaleOutputDoesNotBlock(t *testing.T) {
	pkg := stampModule(t)
	gofile := filepath.Join(pkg, GoFile)
	require.NoError(t, os.WriteFile(gofile, []byte(Header+"\n\npackage svc\n\nvar _ = undefinedName\n\nfunc (s *Svc) Do() {}\n"), 0o644))
	out, err := Generate(context.Background(), Config{Dir: pkg, GoFile: "svc.go"})
	require.NoError(t, err)
	assert.Equal(t, 1, out.Loads)
	assert.NotContains(t, string(out.Files[gofile]), "undefinedName")
	assert.Contains(t, string(out.Files[gofile]), "func (w *IdempotentSvc) Do(")
}

// TestCallerOfAnotherPackagesWrappers: a package whose code calls another
// package's generated wrappers generates, both from scratch and again with
// the outputs in place (when the go command sees them as bare package
// clauses).
func TestCallerOfAnotherPackagesWrappers(t *testing.T) {
	t.Parallel()
	dir := testmod.New(t, "callers", map[string][]byte{
		"a/a.go": []byte(`package a

import "context"

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -tests=false
func (s *Svc) Do(ctx context.Context, id string) error { return nil }
`),
		"b/b.go": []byte(`package b

import (
	"context"

	"example.com/callers/a"
)

// Svc calls a's wrappers.
type Svc struct{ A *a.IdempotentSvc }

// Do does it.
//
//go:generate idemgen -tests=false
func (s *Svc) Do(ctx context.Context, id string) error { return s.A.Do(ctx, id) }
`),
	})
	for run := range 2 {
		out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}})
		require.NoError(t, err, "run %d", run)
		require.Len(t, out.Packages, 2)
		for p, b := range out.Files {
			_, err := WriteFile(p, b)
			require.NoError(t, err)
		}
	}
	r := exec.Command("go", "build", "./...")
	r.Dir = dir
	b, err := r.CombinedOutput()
	require.NoError(t, err, "%s", b)
}

// TestUserOverlayInGOFLAGS: an -overlay the user set in GOFLAGS stays in
// charge (the go command takes one), and generation still works.
func TestUserOverlayInGOFLAGS(t *testing.T) {
	pkg := stampModule(t)
	user := filepath.Join(t.TempDir(), "overlay.json")
	require.NoError(t, os.WriteFile(user, []byte(`{"Replace":{}}`), 0o644))
	t.Setenv("GOFLAGS", "-overlay="+user)
	gofile := filepath.Join(pkg, GoFile)
	require.NoError(t, os.WriteFile(gofile, []byte(Header+"\n\npackage svc\n\nvar _ = undefinedName\n"), 0o644))
	out, err := Generate(context.Background(), Config{Dir: pkg, GoFile: "svc.go"})
	require.NoError(t, err)
	assert.Contains(t, string(out.Files[gofile]), "func (w *IdempotentSvc) Do(")
}

// TestGoCommandRefusal: a module whose go.mod the go command wants updated
// (a fixture file imports runtime/idemtest, whose testify go.mod does not
// list yet: a new user's first run) is answered with the go command's own
// message, not "no Go packages match".
func TestGoCommandRefusal(t *testing.T) {
	dir := testmod.New(t, "refusal", map[string][]byte{
		"svc.go": []byte(`package svc

import "context"

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen
func (s *Svc) Do(ctx context.Context, id string) error { return nil }
`),
		"fixtures_test.go": []byte(`package svc

import "github.com/idemgen/idemgen/runtime/idemtest"

var _ *idemtest.DB
`),
	})
	gomod := filepath.Join(dir, "go.mod")
	b, err := os.ReadFile(gomod)
	require.NoError(t, err)
	// Only the tool's own requirement is left, as after go get -tool.
	stripped := regexp.MustCompile(`(?s)require \(.*?\)\n`).ReplaceAll(b, nil)
	require.NotEqual(t, b, stripped, "the module lists its requirements")
	require.NoError(t, os.WriteFile(gomod, stripped, 0o644))

	_, err = Generate(context.Background(), Config{Dir: dir, GoFile: "svc.go"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the go command cannot list")
	assert.Contains(t, err.Error(), "go mod tidy")
	assert.NotContains(t, err.Error(), "no Go packages match")
}
