// Package load type-checks the packages idemgen generates for, with
// go/packages: one load, generated files read as their bare package clause
// (an -overlay for the go command), and packages whose annotated files the
// build constraints leave out loaded again with tags that take them in.
package load

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/stamp"

	gooverlay "github.com/idemgen/idemgen/internal/overlay"
)

// Package is one package as loaded for generation: the package itself and,
// when it has tests, its internal test variant (where fixtures live).
type Package struct {
	Pkg  *packages.Package
	Test *packages.Package

	Tags    string      // the -tags it was loaded with
	Problem *diag.Error // why no tags take every annotated file in, or nil
	Loads   int         // on the first package: the go/packages loads made
}

// Load type-checks the packages matched by patterns in one go/packages call.
// Files idemgen wrote are parsed as their bare package clause, so stale
// output (whose compile-time guards fail by design) never stops a
// regeneration; the go command's own compile report of such errors is
// ignored by build, which trusts this type-check. The go command sees them
// as their bare package clause too (generatedOverlay).
func Load(ctx context.Context, dir string, patterns []string, tags string) ([]*Package, error) {
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
		flag, cleanup, err := gooverlay.Write(overlay, "idemgen-overlay-")
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
	byPath, order := collect(pkgs)
	again, err := retag(dir, patterns, tags, byPath, order)
	if err != nil {
		return nil, err
	}
	loads, order, err := reload(cfg, again, byPath, order)
	if err != nil {
		return nil, err
	}
	sort.Strings(order)
	if len(order) == 0 {
		if err := goListFailure(ctx, dir, cfg.BuildFlags, patterns); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no Go packages match %s", strings.Join(patterns, " "))
	}
	out := make([]*Package, 0, len(order))
	for _, path := range order {
		out = append(out, byPath[path])
	}
	out[0].Loads = loads
	return out, nil
}

// retag returns the packages to load again, by the -tags value that takes
// in every annotated file of theirs: packages with annotated files the
// build constraints left out, and directories whose every file they left
// out. A package whose annotated files no tags take in at once gets a
// Problem.
func retag(dir string, patterns []string, tags string, byPath map[string]*Package, order []string) (map[string][]string, error) {
	// Packages with annotated files the build constraints left out are
	// loaded again, with tags that take every annotated file in.
	again := map[string][]string{} // -tags value → import paths
	for _, path := range order {
		l := byPath[path]
		l.Tags = tags
		ignored := annotatedIgnored(l.Pkg.IgnoredFiles)
		if len(ignored) == 0 {
			continue
		}
		annotated := append([]string{}, ignored...)
		for _, f := range l.Pkg.GoFiles {
			if b := filepath.Base(f); b != names.GoFile && directive.InFile(f) {
				annotated = append(annotated, f)
			}
		}
		extra, err := tagsFor(tags, annotated)
		if err != nil {
			l.Problem = &diag.Error{Pos: PositionOf(ignored[0]), Msg: err.Error()}
			continue
		}
		t := joinTags(tags, extra)
		again[t] = append(again[t], path)
	}
	// A directory whose every file the constraints leave out is no
	// package to ./..., so its annotated files are looked for here.
	have := map[string]bool{}
	for _, l := range byPath {
		for _, f := range append(append([]string{}, l.Pkg.GoFiles...), l.Pkg.IgnoredFiles...) {
			have[filepath.Dir(f)] = true
		}
	}
	for _, d := range localDirs(dir, patterns) {
		if have[d] {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(d, "*.go"))
		annotated := annotatedIgnored(files)
		if len(annotated) == 0 {
			continue
		}
		extra, err := tagsFor(tags, annotated)
		if err != nil {
			return nil, diag.ErrorList{{Pos: PositionOf(annotated[0]), Msg: err.Error()}}
		}
		t := joinTags(tags, extra)
		again[t] = append(again[t], d)
	}
	return again, nil
}

// reload loads the packages in again with their tags, replacing what the
// first load found for them, and returns the number of loads made (the
// first included) and the import paths, extended.
func reload(cfg *packages.Config, again map[string][]string, byPath map[string]*Package, order []string) (int, []string, error) {
	loads := 1
	for _, t := range SortedKeys(again) {
		cfg.BuildFlags = slices.DeleteFunc(cfg.BuildFlags, func(f string) bool { return strings.HasPrefix(f, "-tags=") })
		cfg.BuildFlags = append(cfg.BuildFlags, "-tags="+t)
		pkgs, err := packages.Load(cfg, again[t]...)
		if err != nil {
			return 0, nil, fmt.Errorf("load %s with -tags=%s: %w", strings.Join(again[t], " "), t, err)
		}
		loads++
		reloaded, paths := collect(pkgs)
		for _, path := range paths {
			l := reloaded[path]
			l.Tags = t
			if byPath[path] == nil {
				order = append(order, path)
			}
			byPath[path] = l
		}
	}
	return loads, order, nil
}

// collect pairs each package go/packages returned with its internal test
// variant, by import path, and returns them with their paths sorted.
func collect(pkgs []*packages.Package) (map[string]*Package, []string) {
	byPath := map[string]*Package{}
	var order []string
	for _, p := range pkgs {
		switch {
		case strings.HasSuffix(p.PkgPath, ".test") && p.Name == "main":
			// the generated test main package
		case p.ID == p.PkgPath:
			if byPath[p.PkgPath] == nil {
				byPath[p.PkgPath] = &Package{}
				order = append(order, p.PkgPath)
			}
			byPath[p.PkgPath].Pkg = p
		case strings.HasSuffix(p.ID, ".test]") && !strings.HasSuffix(p.Name, "_test") && !strings.HasSuffix(p.PkgPath, ".test"):
			if byPath[p.PkgPath] == nil {
				byPath[p.PkgPath] = &Package{}
				order = append(order, p.PkgPath)
			}
			byPath[p.PkgPath].Test = p
		}
	}
	sort.Strings(order)
	kept := order[:0]
	for _, path := range order {
		if byPath[path].Pkg != nil {
			kept = append(kept, path)
		} else {
			delete(byPath, path)
		}
	}
	return byPath, kept
}

// goListFailure asks the go command itself why patterns matched no package.
// go/packages reports a go command that refuses to list anything (go.mod
// needs updating, a missing go.sum entry) as an empty result; the go
// command's own message says what to do, so it is returned instead of a bare
// "no packages".
func goListFailure(ctx context.Context, dir string, buildFlags, patterns []string) error {
	args := append([]string{"list", "-test"}, buildFlags...)
	cmd := exec.CommandContext(ctx, "go", append(append(args, "--"), patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("the go command cannot list %s:\n%s", strings.Join(patterns, " "), msg)
	}
	return nil
}

// SortedKeys returns the keys of m, sorted.
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
		for _, name := range []string{names.GoFile, names.TestFile} {
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
	for _, d := range localDirs(dir, patterns) {
		add(d)
	}
	return overlay
}

// localDirs returns the directories that patterns relative to dir name,
// walking the ones that end in /... as the go command does. Patterns that
// are import paths are not looked into.
func localDirs(dir string, patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if p != "." && p != ".." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") && !filepath.IsAbs(p) {
			continue // an import path
		}
		root, recursive := strings.CutSuffix(p, "/...")
		root = filepath.Join(dir, filepath.FromSlash(root))
		if !recursive {
			out = append(out, root)
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module
			}
			out = append(out, path)
			return nil
		})
	}
	return out
}
