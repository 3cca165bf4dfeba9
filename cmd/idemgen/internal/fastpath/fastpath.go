// Package fastpath ends a go:generate directive whose package is already up
// to date before the rest of idemgen starts.
//
// go generate starts idemgen once per directive, and a package has one
// directive per annotated method. The first directive of a run type-checks
// the package and writes every output with a stamp; the others only need to
// see that stamp match. That check only reads a few files (about 3ms in a
// fresh process), but idemgen's dependencies (go/types, golang.org/x/tools,
// jennifer) would spend several more initialising their packages before main
// could run it.
//
// Go initialises packages in dependency order, and among packages that are
// ready in the lexical order of their import paths. This package and
// gen/stamp depend on the standard library and on idemgen's stdlib-only
// packages alone, and "github.com/idemgen/..." sorts before "go/..." and
// "golang.org/...": so this init runs before theirs, checks the stamp and,
// when it matches, exits 0 with the type checker never initialised. In every other
// case it returns and main runs as usual. TestFastPath in cmd/idemgen holds
// this to account with GODEBUG=inittrace=1.
package fastpath

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/idemgen/idemgen/gen/stamp"
)

func init() {
	if os.Getenv("GOFILE") == "" || strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") != "idemgen" {
		return // not idemgen run by a go:generate directive
	}
	verbose, ok := plainDirective(os.Args[1:])
	if !ok {
		return
	}
	wd, err := os.Getwd()
	if err != nil {
		return
	}
	if match, err := stamp.Matches(wd); err != nil || !match {
		return
	}
	if verbose {
		os.Stderr.WriteString(Unchanged(os.Getenv("GOFILE")))
	}
	os.Exit(0)
}

// Unchanged is what -v prints for a directive in goFile whose package is up
// to date, here or, when the fast path was not taken, in main.
func Unchanged(goFile string) string {
	return "idemgen: " + goFile + ": inputs unchanged since the last run (stamp), nothing to do\n"
}

// plainDirective reports whether args are a directive's flags that leave
// the stamp in charge (not -check, -debug-model or a request for help), and
// whether they ask for -v. Anything it does not recognise is left to main,
// which reports misuse.
func plainDirective(args []string) (verbose, ok bool) {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return false, false // a package pattern or a flag value: main decides
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "check", "debug-model", "h", "help", "":
			return false, false
		case "v":
			verbose = true
		}
	}
	return verbose, true
}
