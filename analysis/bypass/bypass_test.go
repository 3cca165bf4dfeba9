package bypass_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemgen/idemgen/analysis/bypass"
)

func TestBypass(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), bypass.Analyzer, "pay", "handler", "nowrapper", "compose")
}
