package gen

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/internal/testmod"
)

// stampModule generates a small package and writes its outputs.
func stampModule(t testing.TB) string {
	t.Helper()
	dir := testmod.New(t, "stamp", map[string][]byte{"svc/svc.go": []byte(`package svc

import "context"

// Svc is a service.
type Svc struct{}

// Do does it.
//
//go:generate idemgen -tests=false
func (s *Svc) Do(ctx context.Context, id string) error { return nil }
`)})
	out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}})
	require.NoError(t, err)
	for p, b := range out.Files {
		_, err := WriteFile(p, b)
		require.NoError(t, err)
	}
	return filepath.Join(dir, "svc")
}

// TestStamp: a directive run after generation loads nothing; any change to
// an input or an output makes it regenerate.
func TestStamp(t *testing.T) {
	pkg := stampModule(t)
	cfg := Config{Dir: pkg, GoFile: "svc.go"}
	out, err := Generate(context.Background(), cfg)
	require.NoError(t, err)
	require.True(t, out.Unchanged)
	require.Zero(t, out.Loads)

	touch := func(name, extra string) func() {
		p := filepath.Join(pkg, name)
		orig, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, append(append([]byte{}, orig...), extra...), 0o644))
		return func() { require.NoError(t, os.WriteFile(p, orig, 0o644)) }
	}
	for _, c := range []struct{ what, file, extra string }{
		{"a source file", "svc.go", "\n// changed\n"},
		{"the wrappers file", GoFile, "\n// hand edit\n"},
		{"a new source file", "more.go", "package svc\n"},
	} {
		var undo func()
		if _, err := os.Stat(filepath.Join(pkg, c.file)); err == nil {
			undo = touch(c.file, c.extra)
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(pkg, c.file), []byte(c.extra), 0o644))
			undo = func() { require.NoError(t, os.Remove(filepath.Join(pkg, c.file))) }
		}
		out, err := Generate(context.Background(), cfg)
		require.NoError(t, err, c.what)
		require.False(t, out.Unchanged, "changing %s must regenerate", c.what)
		require.Equal(t, 1, out.Loads, c.what)
		undo()
	}
	// A hand-edited migration is not current either, and it is refused,
	// never accepted into the stamp.
	undo := touch("migrations/00001_idemgen_create_idempotency_keys.sql", "\n-- hand edit\n")
	_, err = Generate(context.Background(), cfg)
	var problems *migrations.ProblemError
	require.ErrorAs(t, err, &problems, "a hand-edited migration")
	require.Len(t, problems.Problems, 1)
	assert.Equal(t, migrations.Edited, problems.Problems[0].Kind)
	assert.Equal(t, "migrations", problems.Dir)
	undo()

	mig := filepath.Join(pkg, "migrations", "00001_idemgen_create_idempotency_keys.sql")
	orig, err := os.ReadFile(mig)
	require.NoError(t, err)
	require.NoError(t, os.Remove(mig))
	out, err = Generate(context.Background(), cfg)
	require.NoError(t, err)
	require.False(t, out.Unchanged, "a deleted output must regenerate")
	assert.Equal(t, string(orig), string(out.Files[mig]), "a deleted migration is written back as it was")
}

// BenchmarkStampCheck is what a directive costs in-process when the stamp
// matches (process start-up excluded).
func BenchmarkStampCheck(b *testing.B) {
	pkg := stampModule(b)
	cfg := Config{Dir: pkg, GoFile: "svc.go"}
	for b.Loop() {
		out, err := Generate(context.Background(), cfg)
		if err != nil || !out.Unchanged {
			b.Fatalf("stamp did not match: %v", err)
		}
	}
}
