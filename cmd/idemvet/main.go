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
// exporting its Analyzer, for other drivers. A check's name is its
// package's, and its flag (-effects=false turns it off). -idemeffects,
// the effects check's former name, is still taken for -effects.
package main

import (
	"flag"
	"fmt"

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

// formerNames maps a check's former flag to its name.
var formerNames = map[string]string{"idemeffects": "effects"}

func main() {
	for old, name := range formerNames {
		alias(flag.CommandLine, old, name)
	}
	multichecker.Main(analyzers()...)
}

// alias registers old on fs as another name for the flag name, which the
// driver registers later (multichecker.Main, before it parses): setting
// old sets name. It is a boolean flag, as an analyzer's is, and it is
// listed by -flags, so go vet passes it to the tool.
func alias(fs *flag.FlagSet, old, name string) {
	fs.Var(&aliasValue{fs: fs, name: name}, old, fmt.Sprintf("former name of -%s", name))
}

// aliasValue sets the flag it stands for.
type aliasValue struct {
	fs   *flag.FlagSet
	name string
}

func (a *aliasValue) Set(s string) error {
	if a.fs.Lookup(a.name) == nil {
		return fmt.Errorf("no flag -%s", a.name)
	}
	return a.fs.Set(a.name, s)
}

func (a *aliasValue) String() string {
	if a == nil || a.fs == nil {
		return ""
	}
	if f := a.fs.Lookup(a.name); f != nil {
		return f.Value.String()
	}
	return ""
}

// IsBoolFlag lets -idemeffects stand alone, as -effects does.
func (a *aliasValue) IsBoolFlag() bool { return true }
