package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLauncherImportsOnlyTheStandardLibrary: the launcher must compile
// without the demo's dependencies, or its first line would come after the
// long first compile it announces.
func TestLauncherImportsOnlyTheStandardLibrary(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ImportsOnly)
	require.NoError(t, err)
	require.NotEmpty(t, f.Imports)
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		require.NoError(t, err)
		first, _, _ := strings.Cut(path, "/")
		assert.NotContains(t, first, ".", "main.go imports %s, which is not in the standard library", path)
	}
}

// TestLauncherPassesTheDemoThrough: the launcher prints its line first, then
// builds and runs the demo with the arguments, and ends with its exit code.
func TestLauncherPassesTheDemoThrough(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := launch([]string{"-no-such-flag"}, &stdout, &stderr)
	assert.Equal(t, 2, code, "the demo's exit code for bad usage")
	assert.True(t, strings.HasPrefix(stdout.String(), "Building the demo"), "stdout: %q", stdout.String())
	assert.Contains(t, stderr.String(), "flag provided but not defined: -no-such-flag")
}
