package gen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestStaleGuardsSayGoGenerate: when a request struct or a method changes
// after generation, the compiler's error names a guard whose identifier says
// what to do (runGoGenerate...), not only "cannot convert".
func TestStaleGuardsSayGoGenerate(t *testing.T) {
	t.Parallel()
	const src = `package svc

import "context"

// Req is a request.
type Req struct{ ID string }

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -tests=false
func (s *Svc) Do(ctx context.Context, req Req) error { return nil }
`
	dir := testmod.New(t, "guards", map[string][]byte{"svc/svc.go": []byte(src)})
	out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}})
	require.NoError(t, err)
	for p, b := range out.Files {
		_, err := WriteFile(p, b)
		require.NoError(t, err)
	}
	build := func() string {
		t.Helper()
		cmd := exec.Command("go", "build", "./...")
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		require.Error(t, err, "the stale output must not build")
		return string(b)
	}
	edit := func(old, new string) {
		t.Helper()
		require.Contains(t, src, old)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "svc", "svc.go"), []byte(strings.Replace(src, old, new, 1)), 0o644))
	}

	edit("struct{ ID string }", "struct{ ID, Note string }")
	assert.Contains(t, build(), "runGoGenerateReqFields", "a changed request struct")

	edit("req Req) error", "req Req, n int) error")
	assert.Contains(t, build(), "runGoGenerateSvcDo", "a changed method signature")
}
