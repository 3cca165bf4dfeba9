// Command idemvet checks Go code that uses idemgen for the mistakes that
// undo its guarantee and that no generated test can see:
//
//	bypass     a call of an annotated method around its generated wrapper
//	effects    an atomic or inline method that reaches an effect outside its
//	           transaction (the generator's check, one package at a time)
//	freshkey   an idempotency key minted per attempt inside a retry loop
//	inlinesql  an inline method whose SQL never writes its key column
//
// It runs under go vet, beside the standard checks' driver:
//
//	go vet -vettool=$(go tool -n idemvet) ./...
//
// or on its own, with the flags of any go/analysis multichecker:
//
//	go tool idemvet ./...
//
// Each check is also a package (github.com/idemgen/idemgen/analysis/...)
// exporting its Analyzer, for other drivers.
package main

import (
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/idemgen/idemgen/analysis/bypass"
	"github.com/idemgen/idemgen/analysis/effects"
	"github.com/idemgen/idemgen/analysis/freshkey"
	"github.com/idemgen/idemgen/analysis/inlinesql"
)

// analyzers are idemvet's checks, one per line.
func analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		bypass.Analyzer,
		effects.Analyzer,
		freshkey.Analyzer,
		inlinesql.Analyzer,
	}
}

func main() { multichecker.Main(analyzers()...) }
