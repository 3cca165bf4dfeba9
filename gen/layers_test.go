package gen

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/idemgen/idemgen/"

// layers says which of the generator's packages each may import: the flow
// is load → analyze → ir → emit, one direction, and the facade (gen) alone
// sees them all. A package not listed here fails the test until its place
// is decided. The effect stage (gen/internal/effects) comes after emit:
// it checks the program as it will be once the outputs are written, and
// records the effects it allows in the models, for the wrappers' doc
// comments.
//
// The lists are of dependencies, direct or not; the module's data and
// leaf packages (templates, runtime/idem/ledger and its migformat,
// internal/overlay, internal/gocommand, internal/genheader) may be reached
// by any.
var layers = map[string][]string{
	"gen/ir":                 {},
	"gen/stamp":              {},
	"gen/migrations":         {"gen/stamp"}, // a deleted migration is written back only if its recorded sum matches
	"gen/internal/diag":      {},
	"gen/internal/names":     {"gen/ir", "gen/stamp"},
	"gen/internal/directive": {"gen/internal/diag"}, // no emitter: the migration formats come from migformat, a leaf
	"gen/internal/load":      {"gen/internal/diag", "gen/internal/directive", "gen/internal/names", "gen/ir", "gen/stamp"},
	"gen/internal/analyze":   {"gen/internal/diag", "gen/internal/directive", "gen/internal/load", "gen/internal/names", "gen/ir", "gen/stamp"},
	"gen/internal/golang":    {"gen/ir", "gen/internal/names", "gen/stamp"},
	"gen/internal/gotest":    {"gen/ir", "gen/internal/names", "gen/internal/golang", "gen/stamp"},
	// the effect stage reads the models and the loaded packages; the walk
	// it shares with idemvet's analyzer (internal/effectwalk) is below
	// both, and imports neither.
	"gen/internal/effects": {"gen/internal/diag", "gen/internal/directive", "gen/internal/load", "gen/internal/names", "gen/ir", "gen/stamp", "internal/effectwalk"},
}

// leaves may be reached from any layer.
var leaves = []string{"templates", "runtime/idem/ledger", "runtime/idem/ledger/migformat", "internal/overlay", "internal/gocommand", "internal/genheader"}

// forbidden are the dependencies a layer must not reach, even indirectly:
// the model is plain data, and the emitters print it without type-checking
// anything.
var forbidden = map[string][]string{
	"gen/ir":              {"go/types", "golang.org/x/tools", "github.com/dave/jennifer"},
	"gen/internal/names":  {"go/types", "golang.org/x/tools", "github.com/dave/jennifer"},
	"gen/internal/golang": {"go/types", "golang.org/x/tools"},
	"gen/internal/gotest": {"go/types", "golang.org/x/tools"},
}

// belowGenerator are the packages that must not depend on the generator
// (gen/..., nor the module's root package, which embeds its sources): the
// analyzers and the command that runs them. The arrows run from the
// generator to what it shares with them, never back up.
var belowGenerator = []string{"./analysis/...", "./cmd/idemvet"}

type listed struct {
	ImportPath string
	Deps       []string
}

// TestLayers checks the generator's layering with go list -deps.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", "./...").Output()
	require.NoError(t, err)
	var gens []string
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p listed
		require.NoError(t, dec.Decode(&p))
		gens = append(gens, strings.TrimPrefix(p.ImportPath, module))
	}
	for _, rel := range gens {
		if rel == "gen" || strings.HasPrefix(rel, "gen/migrations/") {
			continue
		}
		allowed, ok := layers[rel]
		if !assert.True(t, ok, "%s has no place in the layers: add it to layers_test.go", rel) {
			continue
		}
		deps := goListDeps(t, module+rel)
		for _, d := range deps {
			if inner, ok := strings.CutPrefix(d, module); ok && inner != rel {
				assert.Contains(t, append(append([]string{}, allowed...), leaves...), inner, "%s must not import %s", rel, inner)
			}
			for _, f := range forbidden[rel] {
				assert.False(t, d == f || strings.HasPrefix(d, f+"/"), "%s must not depend on %s (through %s)", rel, f, d)
			}
		}
	}
}

// TestAnalysisBelowGenerator: no package under analysis/, nor idemvet,
// depends on the generator, directly or not.
func TestAnalysisBelowGenerator(t *testing.T) {
	args := []string{"list", "-deps", "-json"}
	for _, p := range belowGenerator {
		args = append(args, "../"+strings.TrimPrefix(p, "./"))
	}
	out, err := exec.Command("go", args...).Output()
	require.NoError(t, err)
	n := 0
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p listed
		require.NoError(t, dec.Decode(&p))
		n++
		inner, ok := strings.CutPrefix(p.ImportPath, module)
		assert.False(t, p.ImportPath == strings.TrimSuffix(module, "/"), "the analyzers reach the module's root package, which embeds the generator's sources")
		assert.False(t, ok && (inner == "gen" || strings.HasPrefix(inner, "gen/")), "the analyzers reach the generator's %s", inner)
	}
	assert.Greater(t, n, 10)
}

func goListDeps(t *testing.T, pkg string) []string {
	out, err := exec.Command("go", "list", "-deps", "-json", pkg).Output()
	require.NoError(t, err)
	var deps []string
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p listed
		require.NoError(t, dec.Decode(&p))
		if p.ImportPath != pkg {
			deps = append(deps, p.ImportPath)
		}
	}
	return deps
}

// maxFuncLines bounds every function of the generator, tests included.
const maxFuncLines = 100

// TestFunctionLength: no function in gen/ is longer than maxFuncLines.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	for _, f := range goFiles(t, fset) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			n := end.Line - start.Line + 1
			assert.LessOrEqual(t, n, maxFuncLines, "%s:%d: %s is %d lines; split it into readable steps", start.Filename, start.Line, fd.Name.Name, n)
		}
	}
}

// nameParts are the pieces generated identifiers are built from. Only
// package names spells them: a string literal holding one that is joined
// to something (+) elsewhere, or a format that builds one, is a name built
// outside the naming table.
var (
	nameParts  = regexp.MustCompile(`^(Idempotent|NewIdempotent|runGoGenerate|idem|fingerprint|fp|sample|other|count|new|Test|Sweep|InTx|ForTest|Args|Effects|Keys|Fields)$`)
	nameFormat = regexp.MustCompile(`^(Idempotent|NewIdempotent|runGoGenerate|idem|fingerprint|fp|sample|other|count|new|Test|Sweep)%[sd]|%[sd](InTx|ForTest|Args|Effects|Keys|Fields)$|^[ek]%d$`)
)

// TestNamesFromTheTable: the analysis and the emitters build no identifier
// name themselves.
func TestNamesFromTheTable(t *testing.T) {
	fset := token.NewFileSet()
	for _, f := range goFiles(t, fset) {
		file := fset.Position(f.Package).Filename
		if strings.HasSuffix(file, "_test.go") || strings.HasPrefix(file, filepath.Join("internal", "names")+string(filepath.Separator)) ||
			!strings.HasPrefix(file, "internal"+string(filepath.Separator)) {
			continue
		}
		joined := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD {
				for _, x := range []ast.Expr{b.X, b.Y} {
					if lit, ok := x.(*ast.BasicLit); ok {
						joined[lit] = true
					}
				}
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			built := joined[lit] && nameParts.MatchString(v) || nameFormat.MatchString(v)
			assert.False(t, built, "%s: %s builds a generated name: use package names", fset.Position(lit.Pos()), lit.Value)
			return true
		})
	}
}

// goFiles parses every Go file of the generator (gen/ and below, testdata
// aside).
func goFiles(t *testing.T, fset *token.FileSet) []*ast.File {
	var files []*ast.File
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	require.NoError(t, err)
	return files
}
