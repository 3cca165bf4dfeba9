package effectwalk

import (
	"go/ast"
	gobuild "go/build"
	"go/types"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

// Analyzer is the effect check as a go/analysis analyzer, for go vet-style
// runs: it reports an annotated atomic or inline method (a //go:generate
// idemgen directive in its doc comment, a pgx.Tx or *sql.Tx after ctx)
// that reaches a catalogued call, and a database call inside an external
// method's idem.Step function.
//
// It sees one package at a time: what a function reaches through other
// packages comes from facts those packages' runs exported (Reaches), and
// an interface call is resolved to the types of the package and of the
// packages it imports directly. So it can miss what the generator's
// whole-program walk finds: an implementation declared in a package the
// calling package does not import, and effects inside dependencies that
// are not analysed (the standard library is never walked into in either
// mode).
//
// It is named effects, as the other checks are named by their package
// (bypass, freshkey, inlinesql); it was idemeffects, and idemvet still
// takes -idemeffects as another name for -effects.
var Analyzer = &analysis.Analyzer{
	Name:      "effects",
	Doc:       "report calls an idempotent method's transaction cannot undo (HTTP, RPC, brokers, mail, processes, other database handles, files)",
	URL:       "https://pkg.go.dev/github.com/idemgen/idemgen/analysis/effects",
	Requires:  []*analysis.Analyzer{buildssa.Analyzer},
	FactTypes: []analysis.Fact{new(Reaches)},
	Run:       runAnalyzer,
}

// Reaches is the fact a function exports: the catalogued calls it
// reaches, by the shortest path found.
type Reaches struct {
	Effects []Reached
}

// AFact marks Reaches as a fact.
func (*Reaches) AFact() {}

// String prints the fact for tests.
func (r *Reaches) String() string {
	var out []string
	for _, e := range r.Effects {
		if e.Cond != 0 {
			out = append(out, e.Callee+" (unless its handle is the transaction)")
			continue
		}
		out = append(out, e.Callee)
	}
	return "reaches " + strings.Join(out, ", ")
}

// Reached is one catalogued call a function reaches.
type Reached struct {
	Callee string
	Kind   Kind
	Via    []string // the functions between, the reaching one excluded
	Pos    string   // the call, file:line:col
	// Cond, for a statement, are the inputs of the reaching function
	// (parameters, then free variables, as bits) that, if derived from
	// the method's transaction, put it inside: 0 means never.
	Cond uint64
	// Handle describes the statement's handle: HandleParam's name (when
	// >= 0) followed by Handle.
	Handle      string
	HandleParam int
	// At is the call in the reaching function that starts the path.
	At string
}

// handle names a statement's handle as fn sees it.
func (s *summary) handle(fn *ssa.Function, e Reached) string {
	if e.Handle == "" && e.HandleParam < 0 {
		return "its handle"
	}
	return handle{Param: e.HandleParam, Path: e.Handle}.render(fn, nil)
}

// standard reports a package of the standard library: a leaf, never
// walked into (its calls count only where the catalogue names them, at
// the call in the code that makes them).
func standard(pass *analysis.Pass) bool {
	if pass.Module != nil && pass.Module.Path != "" || len(pass.Files) == 0 {
		return false
	}
	name := filepath.ToSlash(pass.Fset.Position(pass.Files[0].Package).Filename)
	if root := gobuild.Default.GOROOT; root != "" && strings.HasPrefix(name, filepath.ToSlash(filepath.Join(root, "src"))+"/") {
		return true
	}
	path := pass.Pkg.Path()
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && strings.Contains(name, "/src/"+path+"/") && !strings.Contains(name, "/testdata/")
}

// summary computes what the functions of one package reach.
type summary struct {
	pass   *analysis.Pass
	memo   map[*ssa.Function][]Reached
	busy   map[*ssa.Function]bool
	oks    map[string]map[int]string // file → line → reason
	types  []types.Type
	flows  *flows
	fields map[*types.Var][]*ssa.Function
}

func runAnalyzer(pass *analysis.Pass) (any, error) {
	res := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	if standard(pass) {
		return nil, nil // the standard library is a leaf: no facts, no walk
	}
	s := &summary{pass: pass, memo: map[*ssa.Function][]Reached{}, busy: map[*ssa.Function]bool{}, oks: map[string]map[int]string{}, flows: newFlows()}
	s.collectTypes()
	for _, f := range pass.Files {
		name := pass.Fset.Position(f.Package).Filename
		lines := map[int]string{}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if reason, ok := parseOK(c.Text); ok && reason != "" {
					lines[pass.Fset.Position(c.Slash).Line] = reason
				}
			}
		}
		s.oks[name] = lines
	}
	for _, fn := range res.SrcFuncs {
		obj, ok := fn.Object().(*types.Func)
		if !ok || fn.Parent() != nil {
			continue
		}
		if r := s.reach(fn); len(r) > 0 {
			pass.ExportObjectFact(obj, &Reaches{Effects: r})
		}
	}
	for _, fn := range res.SrcFuncs {
		decl, ok := fn.Syntax().(*ast.FuncDecl)
		if !ok || decl.Recv == nil || !annotated(decl) {
			continue
		}
		s.reportMethod(fn, decl)
	}
	return nil, nil
}

// annotated reports a method with an idemgen directive in its doc comment.
func annotated(decl *ast.FuncDecl) bool {
	if decl.Doc == nil {
		return false
	}
	for _, c := range decl.Doc.List {
		if line, ok := strings.CutPrefix(c.Text, "//go:generate "); ok && strings.Contains(line, "idemgen") {
			return true
		}
	}
	return false
}

// reportMethod reports what an annotated method reaches, by its mode.
func (s *summary) reportMethod(fn *ssa.Function, decl *ast.FuncDecl) {
	sig := fn.Signature
	atomic := sig.Params().Len() > 1 && isTx(sig.Params().At(1).Type())
	if _, ok := s.docOK(decl); ok {
		return
	}
	name := fn.Name()
	recv := ""
	if n := namedOf(derefType(sig.Recv().Type())); n != nil {
		recv = n.Obj().Name() + "."
	}
	if atomic {
		for _, e := range s.reach(fn) {
			if e.Cond&(1<<2) != 0 {
				continue // a statement on a handle derived from the transaction
			}
			via := ""
			if len(e.Via) > 0 {
				via = " via " + strings.Join(s.local(e.Via), " → ")
			}
			at := ""
			if e.At != "" && e.At != e.Pos {
				at = ", called at " + e.At
			}
			if e.Kind == KindDatabase {
				s.pass.Reportf(decl.Name.Pos(), "%s%s runs in a transaction, but it calls %s%s (%s%s) through %s, which is not derived from the method's transaction: a write there is not undone when the transaction rolls back, so a retry repeats it; run it on the method's transaction, or mark it %s <why repeating it is safe>",
					recv, name, e.Callee, via, e.Pos, at, s.handle(fn, e), OKDirective)
				continue
			}
			s.pass.Reportf(decl.Name.Pos(), "%s%s runs in a transaction, but it calls %s%s (%s%s): that call is not undone when the transaction rolls back, so a retry repeats it; make %s external, move the call after the commit (an outbox), or mark it %s <why repeating it is safe>",
				recv, name, e.Callee, via, e.Pos, at, name, OKDirective)
		}
		return
	}
	for _, st := range stepClosures(fn) {
		for _, e := range s.reach(st.fn) {
			if e.Kind != KindDatabase {
				continue
			}
			s.pass.Reportf(decl.Name.Pos(), "%s%s is external, and the function it passes to idem.Step calls %s (%s) through %s, outside any transaction: a step run again after a crash repeats it; make it safe to repeat and mark it %s <why>, or move it into an atomic method",
				recv, name, e.Callee, e.Pos, s.handle(st.fn, e), OKDirective)
		}
	}
}

// docOK is the reason of an //idem:effect-ok in a method's doc comment.
func (s *summary) docOK(decl *ast.FuncDecl) (string, bool) {
	if decl.Doc == nil {
		return "", false
	}
	for _, c := range decl.Doc.List {
		if reason, ok := parseOK(c.Text); ok && reason != "" {
			return reason, true
		}
	}
	return "", false
}

// collectTypes gathers the candidate dynamic types of interface calls: the
// named types of the package and of its direct imports.
func (s *summary) collectTypes() {
	pkgs := append([]*types.Package{s.pass.Pkg}, s.pass.Pkg.Imports()...)
	for _, p := range pkgs {
		scope := p.Scope()
		for _, n := range scope.Names() {
			tn, ok := scope.Lookup(n).(*types.TypeName)
			if !ok {
				continue
			}
			named, ok := types.Unalias(tn.Type()).(*types.Named)
			if !ok || named.TypeParams().Len() > 0 || types.IsInterface(named) {
				continue
			}
			s.types = append(s.types, named, types.NewPointer(named))
		}
	}
}
