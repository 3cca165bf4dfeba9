package gen

import (
	"path"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/analyze"
	"github.com/idemgen/idemgen/gen/internal/golang"
	"github.com/idemgen/idemgen/gen/internal/gotest"
	"github.com/idemgen/idemgen/gen/internal/load"
	"github.com/idemgen/idemgen/gen/ir"
)

// The pipeline's stages, as Generate calls them: load (package load), then
// build (package analyze) each package into its model, then check the
// models together, then emit (packages golang and gotest).

// build checks one loaded package and returns its model; nil, nil when it
// has no directives.
func build(l *load.Package) (*ir.Package, ErrorList) { return analyze.Package(l) }

// checkLedgerNames refuses methods of one run whose ledger values cannot
// identify them.
func checkLedgerNames(pkgs []*ir.Package) ErrorList { return analyze.CheckLedgerNames(pkgs) }

// emitter renders the Go files of one package model.
type emitter struct{ m *ir.Package }

func newEmitter(m *ir.Package) *emitter { return &emitter{m: m} }

// emitGo renders the wrappers file, without its stamp.
func (e *emitter) emitGo() ([]byte, error) { return golang.New(e.m).File() }

// emitTests renders the generated tests file (see gotest.File).
func (e *emitter) emitTests(migrations map[string][]byte) ([]byte, error) {
	return gotest.File(e.m, migrations)
}

// testMigrations returns the generated migrations among outputs (keyed by
// path relative to the package), by name relative to the migrations
// directory.
func testMigrations(dir string, outputs map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	if dir == "" {
		return out
	}
	for rel, b := range outputs {
		if name, ok := strings.CutPrefix(rel, dir+"/"); ok && !strings.Contains(name, "/") && path.Ext(name) == ".sql" {
			out[name] = b
		}
	}
	return out
}
