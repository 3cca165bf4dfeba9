package effectwalk

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"

	gooverlay "github.com/idemgen/idemgen/internal/overlay"
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
	flows    *flows
	// named are the packages the patterns named; fields indexes the
	// functions their modules' code stores in struct fields (built on
	// the first call through such a field).
	named  []*packages.Package
	fields map[*types.Var][]*ssa.Function
}

// Load type-checks the packages cfg names and their dependencies outside
// the standard library from source, and builds them in SSA form. The
// standard library is read from export data, without function bodies: its
// effects are leaves of the catalogue, never walked into. Test files are
// not loaded, so an implementation that only a test declares (a fake) is
// not a candidate for an interface call.
func Load(ctx context.Context, cfg Config) (*Program, error) {
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	// Outputs that replace a file are read from cfg.Overlay by ParseFile
	// and given to the go command as a build flag: packages.Config's own
	// Overlay would make go/packages distrust all export data and
	// type-check the standard library from source. New outputs cannot be
	// given that way (go/packages reads every file it is told of), so they
	// are left out, unless a named package does not type-check without
	// them: code that already calls the wrappers about to be written.
	existing, fresh := map[string][]byte{}, false
	for name, b := range cfg.Overlay {
		if _, err := os.Stat(name); err == nil {
			existing[name] = b
		} else {
			fresh = true
		}
	}
	p, named, err := load(ctx, cfg, patterns, existing, nil)
	if err != nil || !fresh || !anyBroken(named) {
		return p, err
	}
	p, _, err = load(ctx, cfg, patterns, nil, cfg.Overlay)
	return p, err
}

// anyBroken reports whether a package of pkgs did not type-check.
func anyBroken(pkgs []*packages.Package) bool {
	for _, p := range pkgs {
		if broken(p) {
			return true
		}
	}
	return false
}

// load loads the program: swap replaces files' contents (the go command's
// -overlay and ParseFile), overlay is given to go/packages. It returns the
// program and the packages the patterns named.
func load(ctx context.Context, cfg Config, patterns []string, swap, overlay map[string][]byte) (*Program, []*packages.Package, error) {
	var flags []string
	if cfg.Tags != "" {
		flags = append(flags, "-tags="+cfg.Tags)
	}
	if len(swap) > 0 {
		flag, cleanup, err := gooverlay.Write(swap, "idemgen-effects-")
		if err != nil {
			return nil, nil, err
		}
		defer cleanup()
		flags = append(flags, flag)
	}
	// The packages the walk can enter, listed (cheap), are the roots of
	// the load, type-checked from source: the packages named and those
	// they reach outside the standard library and the leaf packages. The
	// rest is read from export data (types, no bodies).
	list, err := packages.Load(&packages.Config{Context: ctx, Dir: cfg.Dir, BuildFlags: flags, Overlay: overlay,
		Mode: packages.NeedName | packages.NeedImports | packages.NeedDeps | packages.NeedModule}, patterns...)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s for the effect check: %w", strings.Join(patterns, " "), err)
	}
	paths := walked(list)
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("list %s for the effect check: no package of a module", strings.Join(patterns, " "))
	}
	pcfg := &packages.Config{
		Context:    ctx,
		Dir:        cfg.Dir,
		BuildFlags: flags,
		Overlay:    overlay,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
			packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedModule,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			if b, ok := swap[filename]; ok {
				src = b
			}
			return parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
		},
	}
	pkgs, err := packages.Load(pcfg, paths...)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s for the effect check: %w", strings.Join(patterns, " "), err)
	}
	prog := build(pkgs)
	p := &Program{fset: prog.Fset, prog: prog, roots: map[string]*packages.Package{}, files: map[string]*ast.File{},
		impls: map[string][]types.Type{}, oks: map[string]map[int]okComment{}, flows: newFlows()}
	isNamed := map[string]bool{}
	for _, l := range list {
		isNamed[l.PkgPath] = true
	}
	var named []*packages.Package
	for _, pkg := range pkgs {
		p.roots[pkg.PkgPath] = pkg
		if isNamed[pkg.PkgPath] {
			named = append(named, pkg)
		}
		for _, f := range pkg.Syntax {
			p.files[prog.Fset.Position(f.Package).Filename] = f
		}
	}
	for _, pkg := range named {
		if sp := prog.Package(pkg.Types); sp != nil {
			sp.Build()
		}
	}
	p.concrete = concreteTypes(prog)
	p.named = named
	return p, named, nil
}

// fieldFuncs returns the functions the code of the named packages'
// modules stores in field (a constructor's &Client{send: post}).
func (p *Program) fieldFuncs(field *types.Var) []*ssa.Function {
	if p.fields == nil {
		p.fields = map[*types.Var][]*ssa.Function{}
		modules := map[string]bool{}
		for _, n := range p.named {
			if n.Module != nil {
				modules[n.Module.Path] = true
			}
		}
		var fns []*ssa.Function
		for _, pkg := range p.roots {
			if pkg.Module == nil || !modules[pkg.Module.Path] || broken(pkg) {
				continue
			}
			sp := p.prog.Package(pkg.Types)
			if sp == nil {
				continue
			}
			sp.Build()
			for _, m := range sp.Members {
				switch m := m.(type) {
				case *ssa.Function:
					fns = append(fns, m)
				case *ssa.Type:
					if n, ok := types.Unalias(m.Type()).(*types.Named); !ok || n.TypeParams().Len() > 0 || types.IsInterface(n) {
						continue
					}
					mset := p.prog.MethodSets.MethodSet(types.NewPointer(m.Type()))
					for i := 0; i < mset.Len(); i++ {
						if f := p.prog.MethodValue(mset.At(i)); f != nil && f.Pkg == sp {
							fns = append(fns, f)
						}
					}
				}
			}
		}
		storedFuncs(fns, p.fields)
	}
	return p.fields[field]
}

// walked returns the import paths of the packages named and of those they
// import, to the end, without passing through the standard library or a
// leaf package.
func walked(named []*packages.Package) []string {
	var out []string
	seen := map[*packages.Package]bool{}
	var visit func(p *packages.Package, root bool)
	visit = func(p *packages.Package, root bool) {
		if seen[p] || !root && (p.Module == nil || leaf(p.PkgPath)) {
			return
		}
		seen[p] = true
		out = append(out, p.PkgPath)
		for _, path := range sortedImports(p) {
			visit(p.Imports[path], false)
		}
	}
	for _, p := range named {
		visit(p, true)
	}
	return out
}

func sortedImports(p *packages.Package) []string {
	out := make([]string, 0, len(p.Imports))
	for path := range p.Imports {
		out = append(out, path)
	}
	sort.Strings(out)
	return out
}

// build creates the SSA form of every package loaded from source that
// type-checked, and of the packages they import (types only). Function
// bodies are built a package at a time, as the walk reaches them (see
// Program.body), except the named packages' (Load).
func build(pkgs []*packages.Package) *ssa.Program {
	var fset *token.FileSet
	if len(pkgs) > 0 {
		fset = pkgs[0].Fset
	}
	prog := ssa.NewProgram(fset, ssa.InstantiateGenerics)
	created := map[*types.Package]bool{}
	var ok []*packages.Package
	for _, p := range pkgs {
		if p.Types != nil && p.TypesInfo != nil && !broken(p) {
			ok = append(ok, p)
			created[p.Types] = true
		}
	}
	var typesOnly func(t *types.Package)
	typesOnly = func(t *types.Package) {
		if created[t] {
			return
		}
		created[t] = true
		prog.CreatePackage(t, nil, nil, true)
		for _, imp := range t.Imports() {
			typesOnly(imp)
		}
	}
	for _, p := range ok {
		prog.CreatePackage(p.Types, p.Syntax, p.TypesInfo, true)
	}
	for _, p := range ok {
		for _, imp := range p.Types.Imports() {
			typesOnly(imp)
		}
	}
	return prog
}

// broken reports a package whose type-check failed, or one of whose
// dependencies' did.
func broken(p *packages.Package) bool {
	bad := false
	packages.Visit([]*packages.Package{p}, func(q *packages.Package) bool {
		if len(q.Errors) > 0 {
			bad = true
		}
		return !bad
	}, nil)
	return bad
}

// concreteTypes returns every non-generic, non-interface named type the
// program declares at package level, with its pointer, and the types the
// named packages convert to interfaces (instances of generic types among
// them): the dynamic types an interface value can hold (class hierarchy
// analysis, over the program).
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
