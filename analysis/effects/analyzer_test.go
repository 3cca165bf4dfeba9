package effects

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"
)

// TestAnalyzer: what the per-package analyzer reports, through facts
// exported by the package it imports, and its near misses (the
// transaction, logging, //idem:effect-ok, an external method).
func TestAnalyzer(t *testing.T) {
	t.Parallel()
	analysistest.Run(t, analysistest.TestData(), Analyzer, "bank", "pay")
}
