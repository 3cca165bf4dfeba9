package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/analysis"
)

// TestAnalyzers checks that the suite is valid for a driver: named, with
// documentation, requirements and fact types a vet run can serialise.
func TestAnalyzers(t *testing.T) {
	as := analyzers()
	require.NoError(t, analysis.Validate(as))
	names := map[string]bool{}
	for _, a := range as {
		require.NotEmpty(t, a.Doc, a.Name)
		require.False(t, names[a.Name], "two analyzers named %s", a.Name)
		names[a.Name] = true
	}
}
