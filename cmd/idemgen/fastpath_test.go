package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// heavyInit matches the init trace line of a package the fast path must
// not need: the type checker, go/packages and the code emitter.
var heavyInit = regexp.MustCompile(`(?m)^init (go/types|golang\.org/x/tools/go/packages|github\.com/dave/jennifer/jen|github\.com/idemgen/idemgen/gen) @`)

// TestFastPath runs a directive whose package is up to date and checks,
// with the runtime's own init trace, that it exits before the generator's
// heavy dependencies are initialised; after a source change the same
// directive runs the whole generator.
func TestFastPath(t *testing.T) {
	t.Parallel()
	dir := testmod.New(t, "fast", map[string][]byte{"svc/svc.go": []byte(`package svc

import "context"

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -v -tests=false
func (s *Svc) Do(ctx context.Context, id string) error { return nil }
`)})
	path := toolPath(t)
	pkg := filepath.Join(dir, "svc")
	r := sh(t, dir, path, nil, "go", "generate", "./...")
	require.Equal(t, 0, r.code, "go generate: %s", r.stderr)
	require.Contains(t, r.stderr, "type-checked in 1 load(s)")

	directive := []string{"GOFILE=svc.go", "GOLINE=10", "GOPACKAGE=svc", "GODEBUG=inittrace=1"}
	r = sh(t, pkg, path, directive, "idemgen", "-v", "-tests=false")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "idemgen: svc.go: inputs unchanged since the last run (stamp), nothing to do")
	assert.Contains(t, r.stderr, "init os @", "the init trace is on")
	assert.Empty(t, heavyInit.FindAllString(r.stderr, -1), "an up-to-date directive initialised the generator")

	// -check always loads, so it never takes the fast path.
	r = sh(t, pkg, path, directive, "idemgen", "-check")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotEmpty(t, heavyInit.FindAllString(r.stderr, -1))

	src := filepath.Join(pkg, "svc.go")
	orig, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(src, append(orig, "\n// changed\n"...), 0o644))
	r = sh(t, pkg, path, directive, "idemgen", "-v", "-tests=false")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "type-checked in 1 load(s)")
	assert.NotEmpty(t, heavyInit.FindAllString(r.stderr, -1))
}
