package idemgen_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRuntimeImportsNoInternal keeps the arrows pointing down the tree: no
// package under runtime/ (the root module's, and the nested modules'), nor
// its tests, depends, directly or not, on a package under internal/. The
// runtime is what users import; internal/ holds the project's own suites and
// commands, which import the runtime, never the other way round.
func TestRuntimeImportsNoInternal(t *testing.T) {
	const internal = "github.com/idemgen/idemgen/internal/"
	nested, err := filepath.Glob(filepath.Join("runtime", "*", "go.mod"))
	require.NoError(t, err)
	runs := map[string]string{".": "./runtime/..."} // module directory: pattern
	for _, m := range nested {
		runs[filepath.Dir(m)] = "./..."
	}
	require.Len(t, runs, 1+len(nested))
	for dir, pattern := range runs {
		cmd := exec.Command("go", "list", "-deps", "-test", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pattern)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "go list in %s: %s", dir, stderr(err))
		listed := 0
		for line := range strings.Lines(string(out)) {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			listed++
			pkg, imports := fields[0], fields[1:]
			assert.False(t, strings.HasPrefix(pkg, internal), "a package under runtime/ (in %s) depends on %s", dir, pkg)
			for _, imp := range imports {
				assert.False(t, strings.HasPrefix(imp, internal), "%s imports %s", pkg, imp)
			}
		}
		assert.Positive(t, listed, "go list in %s listed nothing", dir)
		if dir == "." {
			// The check sees the packages that used to cross the line.
			assert.True(t, slices.Contains(strings.Fields(string(out)), "github.com/idemgen/idemgen/runtime/idemtest/pgserver"), "go list did not reach runtime/idemtest/pgserver")
		}
	}
}

// stderr is what a failed command wrote to its standard error.
func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
