package analyze

import (
	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/gen/ir"
)

// maxLedgerName bounds a method's ledger value. It is one column of the
// ledger's (scope, method, key) unique index, whose entries PostgreSQL caps
// at about 2.7 kB; this leaves most of that to the scope and the key.
const maxLedgerName = 512

// ledgerName returns the value a method is stored under in the ledger's
// method column: the package's import path, the receiver type and the method,
// "github.com/acme/shop/orders.Service.Create".
//
// Import paths are unique among the packages of a build, and receiver and
// method names are unique within a package, so two methods of one program
// can never share ledger rows, whichever go generate run wrote them: no
// registry across runs is needed. The full path rather than the package name
// or a hash keeps the value unique across modules that share a ledger table
// and readable by an operator in psql, at the cost of some bytes per row. The
// receiver is named without its pointer, so changing a value receiver to a
// pointer keeps the method's keys.
//
// The price of this identity: renaming or moving the package, or renaming
// the type or the method, changes the value, and keys stored under the old
// one are orphaned (a retry is then treated as a new request until the old
// rows expire). Deploy such a rename when no retry of an old request is
// expected, i.e. after the retention window of its last calls.
func ledgerName(pkgPath, receiver, method string) string {
	return pkgPath + "." + receiver + "." + method
}

// CheckLedgerNames refuses methods whose ledger value cannot identify them:
// a package without a real import path (files named on the command line
// are all "command-line-arguments"), a value too long for the ledger's
// index, or two methods of one run sharing a value. The last cannot happen
// while ledgerName includes the import path; the check keeps it so should
// the naming ever change.
func CheckLedgerNames(pkgs []*ir.Package) diag.ErrorList {
	var e diag.Errs
	seen := map[string]*ir.Method{}
	for _, p := range pkgs {
		for _, r := range p.Receivers {
			for _, m := range r.Methods {
				pos := posOf(m.Pos)
				switch {
				case p.Path == "" || p.Path == "command-line-arguments":
					e.Add(pos, "%s: package %s has no import path to name it by in the ledger; run idemgen on a package pattern (./...) inside a module, not on files", m.Key, p.Name)
					continue
				case len(m.Ledger) > maxLedgerName:
					e.Add(pos, "%s: its ledger name (import path, type and method) is %d bytes, more than the %d the ledger's index allows it; shorten the import path", m.Key, len(m.Ledger), maxLedgerName)
					continue
				}
				if other := seen[m.Ledger]; other != nil {
					e.Add(pos, "%s shares the ledger name %q with the method at %s: their keys would replay each other's responses; rename one", m.Key, m.Ledger, other.Pos)
					continue
				}
				seen[m.Ledger] = m
			}
		}
	}
	return e.List
}
