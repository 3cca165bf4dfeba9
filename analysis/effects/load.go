package effects

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
)

// Config says which program to load.
type Config struct {
	// Dir is the directory the patterns are relative to.
	Dir string
	// Patterns name the packages of the program; their dependencies, to
	// the end, come with them. Packages that only the module's main
	// packages import are part of the program only if a pattern names them
	// (./... does).
	Patterns []string
	// Tags are build tags, passed to the go command as -tags.
	Tags string
	// Overlay maps absolute file names to the contents the load reads
	// instead of the files' (the generator's new outputs).
	Overlay map[string][]byte
}

// Program is a loaded program in SSA form, whose annotated methods Check
// walks.
type Program struct {
	fset  *token.FileSet
	prog  *ssa.Program
	roots map[string]*packages.Package // the packages the patterns named, by import path
	files map[string]*ast.File         // every file with bodies, by name

	concrete []types.Type            // candidate dynamic types of interface values
	impls    map[string][]types.Type // by interface type string
	oks      map[string]map[int]okComment
	goroot   string
}

// Load type-checks the packages cfg names and their dependencies from
// source and builds them in SSA form. The standard library is read without
// function bodies: its effects are leaves of the catalogue, never walked
// into. Test files are not loaded, so an implementation that only a test
// declares (a fake) is not a candidate for an interface call.
func Load(ctx context.Context, cfg Config) (*Program, error) {
	goroot, err := goRoot(ctx, cfg.Dir)
	if err != nil {
		return nil, err
	}
	pcfg := &packages.Config{
		Context: ctx,
		Dir:     cfg.Dir,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
			packages.NeedDeps | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax,
		Overlay: cfg.Overlay,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			if goroot != "" && strings.HasPrefix(filename, goroot) {
				f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
				if f != nil {
					dropBodies(f)
				}
				return f, err
			}
			return parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
		},
	}
	if cfg.Tags != "" {
		pcfg.BuildFlags = []string{"-tags=" + cfg.Tags}
	}
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	pkgs, err := packages.Load(pcfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load %s for the effect check: %w", strings.Join(patterns, " "), err)
	}
	prog := build(pkgs, goroot)
	p := &Program{fset: prog.Fset, prog: prog, roots: map[string]*packages.Package{}, files: map[string]*ast.File{},
		impls: map[string][]types.Type{}, oks: map[string]map[int]okComment{}, goroot: goroot}
	for _, pkg := range pkgs {
		p.roots[pkg.PkgPath] = pkg
	}
	packages.Visit(pkgs, nil, func(pkg *packages.Package) {
		for _, f := range pkg.Syntax {
			if name := prog.Fset.Position(f.Package).Filename; goroot == "" || !strings.HasPrefix(name, goroot) {
				p.files[name] = f
			}
		}
	})
	p.concrete = concreteTypes(prog)
	return p, nil
}

// build creates the SSA form of every package that type-checked, and
// builds it. The standard library's packages, read without bodies, report
// imports their bodies used as unused: that is not an error of theirs.
func build(pkgs []*packages.Package, goroot string) *ssa.Program {
	var fset *token.FileSet
	if len(pkgs) > 0 {
		fset = pkgs[0].Fset
	}
	prog := ssa.NewProgram(fset, ssa.InstantiateGenerics)
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if p.Types != nil && p.TypesInfo != nil && !broken(p, goroot) {
			prog.CreatePackage(p.Types, p.Syntax, p.TypesInfo, true)
		}
	})
	prog.Build()
	return prog
}

// broken reports a package whose type-check failed, or one of whose
// dependencies' did, outside the standard library.
func broken(p *packages.Package, goroot string) bool {
	bad := false
	packages.Visit([]*packages.Package{p}, func(q *packages.Package) bool {
		for _, e := range q.Errors {
			if goroot == "" || !strings.HasPrefix(e.Pos, goroot) {
				bad = true
			}
		}
		return !bad
	}, nil)
	return bad
}

// goRoot asks the go command for the standard library's root, with a
// trailing separator.
func goRoot(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOROOT")
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go env GOROOT: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	root := strings.TrimSpace(out.String())
	if root == "" {
		return "", nil
	}
	return filepath.Clean(root) + string(filepath.Separator), nil
}

// dropBodies removes the bodies of a file's non-generic functions: the
// type checker needs their signatures only (a generic function must keep
// its body).
func dropBodies(f *ast.File) {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Type.TypeParams == nil && !genericRecv(fd) {
			fd.Body = nil
		}
	}
}

// concreteTypes returns every non-generic, non-interface named type the
// program declares at package level, with its pointer, and the types the
// program converts to interfaces: the dynamic types an interface value can
// hold (class hierarchy analysis, over the program).
func concreteTypes(prog *ssa.Program) []types.Type {
	var out []types.Type
	seen := map[types.Type]bool{}
	add := func(t types.Type) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, pkg := range prog.AllPackages() {
		for _, m := range pkg.Members {
			tn, ok := m.(*ssa.Type)
			if !ok {
				continue
			}
			named, ok := types.Unalias(tn.Type()).(*types.Named)
			if !ok || named.TypeParams().Len() > 0 || types.IsInterface(named) {
				continue
			}
			add(named)
			add(types.NewPointer(named))
		}
	}
	for _, t := range prog.RuntimeTypes() {
		if !types.IsInterface(t) {
			add(t)
		}
	}
	return out
}

// implementations returns the candidate dynamic types that implement
// iface.
func (p *Program) implementations(iface types.Type) []types.Type {
	key := types.TypeString(iface, nil)
	if ts, ok := p.impls[key]; ok {
		return ts
	}
	it, _ := iface.Underlying().(*types.Interface)
	var out []types.Type
	if it != nil {
		for _, t := range p.concrete {
			if types.Implements(t, it) {
				out = append(out, t)
			}
		}
	}
	p.impls[key] = out
	return out
}

// genericRecv reports a method of a generic type.
func genericRecv(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return false
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t.(type) {
	case *ast.IndexExpr, *ast.IndexListExpr:
		return true
	}
	return false
}
