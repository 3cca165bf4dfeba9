package freshkey_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemgen/idemgen/analysis/freshkey"
)

func TestFreshKey(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), freshkey.Analyzer, "retry")
}
