package effectwalk

import (
	"fmt"
	"go/ast"
	gobuild "go/build"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
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

func isTx(t types.Type) bool {
	if n := namedOf(t); n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/jackc/pgx/v5" && n.Obj().Name() == "Tx" {
		return true
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		if n := namedOf(p.Elem()); n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "database/sql" && n.Obj().Name() == "Tx" {
			return true
		}
	}
	return false
}

func derefType(t types.Type) types.Type {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		return p.Elem()
	}
	return t
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

// reach returns what fn reaches, each catalogued call once, by the
// shortest path found. A statement through a handle that may come from
// fn's inputs is conditional (Reached.Cond): the caller decides, from
// what it passes, whether that handle is its transaction's.
func (s *summary) reach(fn *ssa.Function) []Reached {
	if r, ok := s.memo[fn]; ok {
		return r
	}
	if s.busy[fn] {
		return nil // a cycle: its other paths are found from its first entry
	}
	s.busy[fn] = true
	var out []Reached
	seen := map[string]int{}
	add := func(e Reached) {
		k := e.Pos + " " + e.Callee
		if i, ok := seen[k]; ok {
			if len(e.Via) < len(out[i].Via) {
				out[i] = e
			} else if len(e.Via) == len(out[i].Via) {
				out[i].Cond |= e.Cond
			}
			return
		}
		seen[k] = len(out)
		out = append(out, e)
	}
	position := func(pos token.Pos) string {
		if !pos.IsValid() {
			return ""
		}
		return s.pass.Fset.Position(pos).String()
	}
	// through adds what g reaches, called at pos with args (receiver
	// first; nil when g is taken as a value, whose parameters' origin is
	// unknown) and, for a closure, bindings.
	through := func(g *ssa.Function, pos token.Pos, es []Reached, args []ssa.Value, bindings []ssa.Value) {
		if s.allowedAt(pos) {
			return
		}
		for _, e := range es {
			r := Reached{Callee: e.Callee, Kind: e.Kind, Via: append([]string{s.name(g)}, e.Via...), Pos: e.Pos, Handle: e.Handle, HandleParam: -1, At: position(pos)}
			if r.Pos == "" {
				r.Pos = position(pos)
			}
			if e.Cond != 0 || e.HandleParam >= 0 {
				inside := false
				for i := 0; i < 64; i++ {
					if e.Cond&(1<<i) == 0 {
						continue
					}
					v, known := input(g, i, args, bindings)
					if !known {
						inside = true // a callback's parameter: its origin is unknown
						break
					}
					if v != nil {
						r.Cond |= s.flows.of(v)
					}
				}
				if inside {
					continue
				}
				if e.HandleParam >= 0 {
					if v, _ := input(g, e.HandleParam, args, bindings); v != nil {
						h := describe(v)
						r.HandleParam, r.Handle = h.Param, h.Path+e.Handle
					}
				}
			}
			add(r)
		}
	}
	direct := func(pos token.Pos, e Entry, callee string) {
		if s.allowedAt(pos) {
			return
		}
		add(Reached{Callee: callee, Kind: e.Kind, Pos: position(pos), HandleParam: -1, At: position(pos)})
	}
	enter := func(g *ssa.Function, pos token.Pos, args, bindings []ssa.Value) {
		o := origin(g)
		if o.Pkg != nil && o.Pkg.Pkg == s.pass.Pkg && len(g.Blocks) > 0 || g.Parent() != nil {
			through(g, pos, s.reach(g), args, bindings)
			return
		}
		obj, ok := o.Object().(*types.Func)
		if !ok || obj.Pkg() == nil || leaf(obj.Pkg().Path()) {
			return
		}
		var f Reaches
		if s.pass.ImportObjectFact(obj, &f) {
			through(g, pos, f.Effects, args, bindings)
		}
	}
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			var callee ssa.Value
			if c, ok := instr.(ssa.CallInstruction); ok {
				common := c.Common()
				pos := c.Pos()
				if !common.IsInvoke() {
					callee = common.Value
				}
				if name, ok := statement(common); ok {
					if _, _, isCat := catalogued0(common); !isCat {
						if s.allowedAt(pos) {
							goto operands
						}
						var cond uint64
						for _, v := range statementInputs(common) {
							cond |= s.flows.of(v)
						}
						r := Reached{Callee: name, Kind: KindDatabase, Pos: position(pos), Cond: cond, HandleParam: -1, At: position(pos)}
						if h := statementHandle(common, common.StaticCallee()); h != nil {
							d := describe(h)
							r.HandleParam, r.Handle = d.Param, d.Path
						}
						add(r)
						goto operands
					}
				}
				if name, write, ok := rueidisCall(common); ok {
					if write {
						direct(pos, Entry{Kind: KindStore}, name)
					}
					goto operands
				}
				if e, name, ok := funcTypeCall(common); ok {
					direct(pos, e, name)
					goto operands
				}
				if redisReadDo(common) {
					goto operands
				}
				switch {
				case common.IsInvoke():
					named := namedOf(common.Value.Type())
					if named != nil && named.Obj().Pkg() != nil {
						path := named.Obj().Pkg().Path()
						if e, ok := lookup(path, named.Obj().Name(), common.Method.Name()); ok {
							direct(pos, e, fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), common.Method.Name()))
							break
						}
						if leaf(path) {
							break
						}
					}
					it, _ := common.Value.Type().Underlying().(*types.Interface)
					args := append([]ssa.Value{common.Value}, common.Args...)
					for _, t := range s.types {
						if it == nil || !types.Implements(t, it) {
							continue
						}
						g := s.pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA).Pkg.Prog.LookupMethod(t, common.Method.Pkg(), common.Method.Name())
						if g == nil {
							continue
						}
						if e, name, ok := catalogued(g); ok {
							if !e.Static {
								direct(pos, e, name)
							}
							continue
						}
						enter(g, pos, args, nil)
					}
				default:
					g := common.StaticCallee()
					if g == nil {
						if field := fieldOf(common.Value); field != nil {
							for _, h := range s.fieldFuncs()[field] {
								if e, name, ok := catalogued(h); ok {
									if !e.Static {
										direct(pos, e, name)
									}
									continue
								}
								enter(h, pos, nil, nil)
							}
						}
						break
					}
					if e, name, ok := catalogued(g); ok {
						switch {
						case e.Kind == KindDatabase && len(common.Args) > 0 && connOfTx(common.Args[0]):
						case e.Kind == KindFile && len(common.Args) > 0 && stdStream(common.Args[0]):
						case readOnlyOpen(g, common.Args):
						default:
							if s.allowedAt(pos) {
								break
							}
							r := Reached{Callee: name, Kind: e.Kind, Pos: position(pos), HandleParam: -1, At: position(pos)}
							if e.Kind == KindDatabase && len(common.Args) > 0 {
								d := describe(common.Args[0])
								r.HandleParam, r.Handle = d.Param, d.Path
							}
							add(r)
						}
						break
					}
					if e, name, ok := beginFunc(g, common.Args); ok {
						direct(pos, e, name)
						break
					}
					var bindings []ssa.Value
					if mc, ok := common.Value.(*ssa.MakeClosure); ok {
						bindings = mc.Bindings
					}
					enter(g, pos, common.Args, bindings)
				}
			}
		operands:
			var ops []*ssa.Value
			for _, op := range instr.Operands(ops) {
				if op == nil || *op == callee {
					continue
				}
				if g := funcOf(*op); g != nil {
					var bindings []ssa.Value
					if mc, ok := (*op).(*ssa.MakeClosure); ok {
						bindings = mc.Bindings
					}
					enter(g, instr.Pos(), nil, bindings)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos < out[j].Pos })
	delete(s.busy, fn)
	s.memo[fn] = out
	return out
}

// input is the value a call passes for input i of g (its parameters, then
// its free variables): known is false when g is taken as a value and i
// is a parameter; v is nil when the call passes nothing there.
func input(g *ssa.Function, i int, args, bindings []ssa.Value) (v ssa.Value, known bool) {
	// A function of another package has no parameters in this program
	// (no body): count them from its signature.
	params := g.Signature.Params().Len()
	if g.Signature.Recv() != nil {
		params++
	}
	if i < params {
		if args == nil {
			return nil, false
		}
		if i < len(args) {
			return args[i], true
		}
		return nil, true
	}
	if j := i - params; j < len(bindings) {
		return bindings[j], true
	}
	return nil, true
}

// fieldFuncs indexes the functions the package stores in struct fields.
func (s *summary) fieldFuncs() map[*types.Var][]*ssa.Function {
	if s.fields == nil {
		s.fields = map[*types.Var][]*ssa.Function{}
		storedFuncs(s.pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA).SrcFuncs, s.fields)
	}
	return s.fields
}

// allowedAt reports an //idem:effect-ok with a reason on the line of pos
// or alone on the line above.
func (s *summary) allowedAt(pos token.Pos) bool {
	p := s.pass.Fset.Position(pos)
	lines := s.oks[p.Filename]
	return lines[p.Line] != "" || lines[p.Line-1] != ""
}

// name is how facts name fn: pkg.Recv.Method or pkg.Func, qualified by
// package name; closures as the runtime names them. Messages drop the
// analysed package's name (local).
func (s *summary) name(fn *ssa.Function) string {
	w := &walk{}
	return w.name(fn)
}

// local drops the analysed package's name from the names of a path.
func (s *summary) local(via []string) []string {
	out := make([]string, len(via))
	for i, v := range via {
		out[i] = strings.TrimPrefix(v, s.pass.Pkg.Name()+".")
	}
	return out
}
