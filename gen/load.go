package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/idemgen/idemgen/gen/stamp"
)

// Header is the first line of every Go file idemgen writes.
const Header = stamp.Header

// loaded is one package as loaded for generation: the package itself and,
// when it has tests, its internal test variant (where fixtures live).
type loaded struct {
	pkg  *packages.Package
	test *packages.Package
}

// load type-checks the packages matched by patterns in one go/packages call.
// Files idemgen wrote are parsed as their bare package clause, so stale
// output (whose compile-time guards fail by design) never stops a
// regeneration; the go command's own compile report of such errors is
// ignored by build, which trusts this type-check. The go command sees them
// as their bare package clause too (generatedOverlay).
func load(ctx context.Context, dir string, patterns []string, tags string) ([]*loaded, error) {
	cfg := &packages.Config{
		Context: ctx,
		Dir:     dir,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedModule,
		Tests: true,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			if stamp.IsGenerated(src) {
				return parser.ParseFile(fset, filename, src, parser.PackageClauseOnly)
			}
			return parser.ParseFile(fset, filename, src, parser.AllErrors|parser.ParseComments|parser.SkipObjectResolution)
		},
	}
	if tags != "" {
		cfg.BuildFlags = []string{"-tags=" + tags}
	}
	if overlay := generatedOverlay(dir, patterns); len(overlay) > 0 && !strings.Contains(os.Getenv("GOFLAGS"), "-overlay") {
		// Given to the go command only, as a build flag: packages.Config's own
		// Overlay would make go/packages distrust all export data and
		// type-check every dependency from source. An -overlay of the user's
		// in GOFLAGS is left in charge; the load is only slower.
		flag, cleanup, err := writeOverlay(overlay)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		cfg.BuildFlags = append(cfg.BuildFlags, flag)
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", strings.Join(patterns, " "), err)
	}
	byPath := map[string]*loaded{}
	var order []string
	for _, p := range pkgs {
		switch {
		case strings.HasSuffix(p.PkgPath, ".test") && p.Name == "main":
			// the generated test main package
		case p.ID == p.PkgPath:
			if byPath[p.PkgPath] == nil {
				byPath[p.PkgPath] = &loaded{}
				order = append(order, p.PkgPath)
			}
			byPath[p.PkgPath].pkg = p
		case strings.HasSuffix(p.ID, ".test]") && !strings.HasSuffix(p.Name, "_test") && !strings.HasSuffix(p.PkgPath, ".test"):
			if byPath[p.PkgPath] == nil {
				byPath[p.PkgPath] = &loaded{}
				order = append(order, p.PkgPath)
			}
			byPath[p.PkgPath].test = p
		}
	}
	sort.Strings(order)
	out := make([]*loaded, 0, len(order))
	for _, path := range order {
		if l := byPath[path]; l.pkg != nil {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Go packages match %s", strings.Join(patterns, " "))
	}
	return out, nil
}

// writeOverlay writes overlay as the go command's -overlay file and the
// replacement files it names, in a new temporary directory, and returns the
// flag and a function that removes them.
func writeOverlay(overlay map[string][]byte) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "idemgen-overlay-")
	if err != nil {
		return "", nil, fmt.Errorf("write load overlay: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	replace := map[string]string{}
	paths := make([]string, 0, len(overlay))
	for p := range overlay {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, p := range paths {
		name := filepath.Join(tmp, fmt.Sprintf("%d.go", i))
		if err := os.WriteFile(name, overlay[p], 0o600); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("write load overlay: %w", err)
		}
		replace[p] = name
	}
	js, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "overlay.json"), js, 0o600)
	}
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("write load overlay: %w", err)
	}
	return "-overlay=" + filepath.Join(tmp, "overlay.json"), cleanup, nil
}

// generatedOverlay maps every file idemgen wrote in the packages that
// patterns name relative to dir to its bare package clause. load hands it to
// the go command, which then compiles the packages' export data without
// their generated code: that code is about to be replaced, may be stale (its
// compile-time guards fail by design), and for a package with many methods
// compiling it costs more than the rest of the load. Code in another package
// that calls a package's wrappers sees them undefined while generating; like
// any type error outside an annotated signature, that does not stop
// generation. Patterns that are import paths are not looked into.
func generatedOverlay(dir string, patterns []string) map[string][]byte {
	overlay := map[string][]byte{}
	add := func(pkgDir string) {
		for _, name := range []string{GoFile, TestFile} {
			path := filepath.Join(pkgDir, name)
			src, err := os.ReadFile(path)
			if err != nil || !stamp.IsGenerated(src) {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.PackageClauseOnly)
			if err != nil {
				continue
			}
			overlay[path] = []byte("package " + f.Name.Name + "\n")
		}
	}
	for _, p := range patterns {
		if p != "." && p != ".." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") && !filepath.IsAbs(p) {
			continue // an import path
		}
		root, recursive := strings.CutSuffix(p, "/...")
		root = filepath.Join(dir, filepath.FromSlash(root))
		if !recursive {
			add(root)
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			add(path)
			return nil
		})
	}
	return overlay
}
