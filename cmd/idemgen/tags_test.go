package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestBuildTags runs go generate -tags on a package whose annotated file
// has a //go:build line: the outputs are written with that constraint, the
// package builds and vets with and without the tag, and idemgen -check
// (given no tags) checks the tagged package, so a stale output fails it.
func TestBuildTags(t *testing.T) {
	t.Parallel()
	svc := `//go:build pro

package svc

import "context"

// Svc is the paid edition.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -tests=false -migration-format=plain
func (s *Svc) Do(ctx context.Context, id string) error { return nil }
`
	dir := testmod.New(t, "tags", map[string][]byte{
		"svc/svc.go":  []byte(svc),
		"svc/free.go": []byte("package svc\n\n// Free is in every build.\nconst Free = true\n"),
	})
	path := toolPath(t)
	r := sh(t, dir, path, nil, "go", "generate", "-tags", "pro", "./...")
	require.Equal(t, 0, r.code, r.stderr)
	out, err := os.ReadFile(filepath.Join(dir, "svc", "idem_gen.go"))
	require.NoError(t, err, "go generate -tags pro wrote nothing")
	assert.Contains(t, string(out), "\n//go:build pro\n\npackage svc\n")

	for _, args := range [][]string{{"vet", "-tags", "pro", "./..."}, {"vet", "./..."}, {"build", "./..."}} {
		r := sh(t, dir, path, nil, "go", args...)
		require.Equal(t, 0, r.code, "go %v: %s", args, r.stderr)
	}
	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	require.Equal(t, 0, r.code, "-check on fresh output: %s", r.stderr)

	// A changed tagged file makes the output stale: -check sees it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "svc", "svc.go"), []byte(svc+"\n// Do2 does more.\n//\n//go:generate idemgen -tests=false\nfunc (s *Svc) Do2(ctx context.Context, n int) error { return nil }\n"), 0o644))
	r = sh(t, dir, path, nil, "idemgen", "-check", "./...")
	assert.Equal(t, 1, r.code, "-check on stale output: %s", r.stderr)
	assert.Contains(t, r.stderr, "stale")
}
