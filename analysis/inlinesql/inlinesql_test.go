package inlinesql_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemgen/idemgen/analysis/inlinesql"
)

func TestInlineSQL(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), inlinesql.Analyzer, "shop", "shop/db")
}
