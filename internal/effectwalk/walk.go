package effectwalk

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
)

// idemPath is the runtime package whose Step an external method records
// its effects through.
const idemPath = "github.com/idemgen/idemgen/runtime/idem"

// Method names an annotated method to check.
type Method struct {
	Pkg  string // import path
	Recv string // receiver type name
	Name string // method name
	// Steps checks an external method: not its body (an external
	// method's effects are its business), but the closures it passes to
	// idem.Step, and only for database writes outside a transaction.
	Steps bool
}

// Finding is one effect call reachable from a method.
type Finding struct {
	Entry  Entry          // the catalogue entry that names the call
	Callee string         // the function called, e.g. (*net/http.Client).Do
	Pos    token.Position // the call
	// Path is the chain of calls from the method to the function making
	// the effect call, the method excluded: Path[i] is called at
	// Path[i].Pos. Empty when the method makes the call itself.
	Path []Hop
	// Allowed is the reason an //idem:effect-ok comment gives for the
	// call (on the call's line or one of the path's, or on the method's
	// doc comment); "" when the call is reported.
	Allowed   string
	AllowedAt token.Position
	// Exit is the last call of the path in the method's module: the
	// user's own call that leads out of it (into an SDK); invalid when the
	// whole path stays in the module.
	Exit token.Position
	// Handle says where the handle of a statement outside the
	// transaction comes from (s.db, the result of pgxpool.New), when the
	// finding is one.
	Handle string
}

// Hop is a function on the path to an effect.
type Hop struct {
	Func string         // its name, qualified by package name outside the method's package: Bank.Transfer, stripe.Client.New, Payments.Charge.func1
	Pos  token.Position // where the previous function calls it
}

// Problem is a mistake in an //idem:effect-ok comment on a path the walk
// took.
type Problem struct {
	Pos token.Position
	Msg string
}

// Report is what Check found for one method.
type Report struct {
	Pos      token.Position // the method's name
	Findings []Finding      // sorted by position
	Problems []Problem
}

// Check walks everything m can call, in the program, and returns each
// effect call it reaches with the shortest path to it. Calls on the
// method's transaction (pgx.Tx, *sql.Tx) and into leaf packages are not
// followed.
func (p *Program) Check(m Method) (*Report, error) {
	fn, decl, err := p.method(m)
	if err != nil {
		return nil, err
	}
	r := &Report{Pos: p.fset.Position(fn.Pos())}
	w := &walk{p: p, m: m, root: node{fn: fn}, pkg: fn.Pkg.Pkg, report: r, parent: map[node]edge{}, inputs: map[node][]string{}, seen: map[string]bool{}}
	w.docOK, w.docOKPos = p.docOK(decl, r)
	if m.Steps {
		w.parent[w.root] = edge{}
		for _, step := range stepClosures(fn) {
			w.visit(node{fn: step.fn, mask: allInputs &^ freeMask(step.fn)}, edge{from: w.root, pos: step.pos}, nil)
		}
	} else {
		// The transaction is the parameter after ctx (Params[0] is the
		// receiver).
		var mask uint64
		if len(fn.Params) > 2 && isTx(fn.Params[2].Type()) {
			mask = 1 << 2
		}
		w.root.mask = mask
		w.visit(w.root, edge{}, nil)
	}
	w.run()
	sort.SliceStable(r.Findings, func(i, j int) bool { return less(r.Findings[i].Pos, r.Findings[j].Pos) })
	return r, nil
}

func less(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Column < b.Column
}

// method finds the SSA function and declaration of m.
func (p *Program) method(m Method) (*ssa.Function, *ast.FuncDecl, error) {
	lp := p.roots[m.Pkg]
	if lp == nil {
		return nil, nil, fmt.Errorf("package %s is not loaded", m.Pkg)
	}
	if broken(lp) {
		msg := "it does not type-check"
		if err := firstError(lp); err != "" {
			msg += ": " + err
		}
		return nil, nil, fmt.Errorf("cannot check the effects of %s.%s: %s", m.Recv, m.Name, msg)
	}
	sp := p.prog.Package(lp.Types)
	obj := lp.Types.Scope().Lookup(m.Recv)
	tn, ok := obj.(*types.TypeName)
	if sp == nil || !ok {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	sel := p.prog.MethodSets.MethodSet(types.NewPointer(tn.Type())).Lookup(lp.Types, m.Name)
	if sel == nil {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	fn := p.prog.FuncValue(sel.Obj().(*types.Func))
	if fn == nil {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	decl, _ := fn.Syntax().(*ast.FuncDecl)
	return fn, decl, nil
}

// step is a function handed to idem.Step.
type step struct {
	fn  *ssa.Function
	pos token.Pos
}

// freeMask is the bits of fn's free variables.
func freeMask(fn *ssa.Function) uint64 {
	var m uint64
	for i := range fn.FreeVars {
		if b := len(fn.Params) + i; b < 64 {
			m |= 1 << b
		}
	}
	return m
}

// stepClosures returns the functions fn (and the closures it declares)
// passes to idem.Step.
func stepClosures(fn *ssa.Function) []step {
	var out []step
	var scan func(f *ssa.Function)
	scan = func(f *ssa.Function) {
		for _, b := range f.Blocks {
			for _, instr := range b.Instrs {
				c, ok := instr.(ssa.CallInstruction)
				if !ok {
					continue
				}
				callee := c.Common().StaticCallee()
				if callee == nil || len(c.Common().Args) < 3 {
					continue
				}
				if o := origin(callee); o.Pkg == nil || o.Pkg.Pkg.Path() != idemPath || o.Name() != "Step" {
					continue
				}
				if g := funcOf(c.Common().Args[2]); g != nil {
					out = append(out, step{fn: g, pos: c.Pos()})
				}
			}
		}
		for _, anon := range f.AnonFuncs {
			scan(anon)
		}
	}
	scan(fn)
	return out
}

func origin(fn *ssa.Function) *ssa.Function {
	if o := fn.Origin(); o != nil {
		return o
	}
	return fn
}

// funcOf is the function a value certainly holds: a function or a closure.
func funcOf(v ssa.Value) *ssa.Function {
	switch v := v.(type) {
	case *ssa.Function:
		return v
	case *ssa.MakeClosure:
		f, _ := v.Fn.(*ssa.Function)
		return f
	case *ssa.ChangeType:
		return funcOf(v.X)
	}
	return nil
}

// node is a function as the walk reaches it: with the inputs (bits of
// its parameters, then of its free variables) that are derived from the
// method's transaction at the call that reached it.
type node struct {
	fn   *ssa.Function
	mask uint64
}

// edge is how the walk reached a node: from which, at which call.
type edge struct {
	from node
	pos  token.Pos
}

// walk is a breadth-first walk of the functions a method reaches, so the
// first path to each effect call is a shortest one.
type walk struct {
	p      *Program
	m      Method
	pkg    *types.Package
	root   node // the method
	report *Report
	docOK  string
	// docOKPos is the method's //idem:effect-ok comment.
	docOKPos token.Position

	queue  []node
	parent map[node]edge
	// inputs are the descriptions of a node's inputs, as the call that
	// reached it passed them (s.q for the receiver of Queries.CreateX).
	inputs map[node][]string
	seen   map[string]bool // effect calls reported, by position and callee
}

func (w *walk) visit(n node, e edge, inputs []string) {
	if n.fn == nil {
		return
	}
	if _, ok := w.parent[n]; ok {
		return
	}
	w.parent[n] = e
	w.inputs[n] = inputs
	w.queue = append(w.queue, n)
}

func (w *walk) run() {
	for len(w.queue) > 0 {
		n := w.queue[0]
		w.queue = w.queue[1:]
		w.scan(n)
	}
}

// derived reports whether v, in the function of n, is derived from the
// method's transaction.
func (w *walk) derived(n node, v ssa.Value) bool {
	return w.p.flows.of(v)&n.mask != 0
}

// describe names where v, in n's function, comes from.
func (w *walk) describe(n node, v ssa.Value) string {
	return describe(v).render(n.fn, w.inputs[n])
}

// callee is the node a call reaches in g, given its arguments (receiver
// first), and the descriptions of g's inputs.
func (w *walk) callee(n node, g *ssa.Function, args []ssa.Value, closure *ssa.MakeClosure) (node, []string) {
	c := node{fn: g}
	// g's parameters are counted from its signature: g.Params is empty
	// until its package is built, which the walk does only when it
	// scans g (a helper in a package not reached yet).
	params := g.Signature.Params().Len()
	if g.Signature.Recv() != nil {
		params++
	}
	names := make([]string, params+len(g.FreeVars))
	for i, a := range args {
		if i >= params || i >= 64 {
			break
		}
		if w.derived(n, a) {
			c.mask |= 1 << i
		}
		if handleLike(a.Type()) && !isContext(a.Type()) {
			names[i] = w.describe(n, a)
		}
	}
	if closure != nil {
		for j, b := range closure.Bindings {
			i := params + j
			if i >= 64 || i >= len(names) {
				break
			}
			if w.derived(n, b) {
				c.mask |= 1 << i
			}
			names[i] = w.describe(n, b)
		}
	}
	return c, names
}

// valueNode is the node of a function taken as a value: its parameters'
// origin is unknown (taken to be the transaction's: a callback such as
// pgx.BeginFunc's), its free variables are the closure's bindings.
func (w *walk) valueNode(n node, v ssa.Value, g *ssa.Function) (node, []string) {
	mc, _ := v.(*ssa.MakeClosure)
	c, names := w.callee(n, g, nil, mc)
	c.mask |= allInputs &^ freeMask(g)
	return c, names
}

// scan looks at every call and function value of n's function.
func (w *walk) scan(n node) {
	fn := n.fn
	if fn.Pkg != nil && fn.Blocks == nil && fn.Synthetic == "" {
		fn.Pkg.Build() // bodies are built as the walk reaches their package
	}
	var ops []*ssa.Value
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			var callee ssa.Value
			if c, ok := instr.(ssa.CallInstruction); ok {
				w.call(n, c)
				if !c.Common().IsInvoke() {
					callee = c.Common().Value
				}
			}
			// A function or closure taken as a value in reached code is
			// taken to be called: where it is called from is seldom
			// visible (a callback, a field), and its effects are the
			// method's all the same.
			ops = instr.Operands(ops[:0])
			for _, op := range ops {
				if op == nil || *op == callee {
					continue
				}
				if g := funcOf(*op); g != nil && !w.skip(g) {
					c, names := w.valueNode(n, *op, g)
					w.visit(c, edge{from: n, pos: instr.Pos()}, names)
				}
			}
		}
	}
}

// skip reports a function not to walk into: in a leaf package, or one of
// the SQL libraries (their statements are judged at the call that hands
// them a handle).
func (w *walk) skip(g *ssa.Function) bool {
	o := origin(g)
	if o.Pkg != nil && leaf(o.Pkg.Pkg.Path()) {
		return true
	}
	if obj, ok := o.Object().(*types.Func); ok && obj.Pkg() != nil && leaf(obj.Pkg().Path()) {
		return true
	}
	return false
}

// call handles one call site of n's function.
func (w *walk) call(n node, c ssa.CallInstruction) {
	fn := n.fn
	common := c.Common()
	pos := c.Pos()
	if name, ok := statement(common); ok {
		if _, _, isCat := catalogued0(common); !isCat {
			w.statement(n, common, pos, name)
			return
		}
	}
	if name, write, ok := rueidisCall(common); ok {
		if write {
			w.found(n, pos, Entry{Pkg: funcPkgOf(common), Kind: KindStore}, name, "")
		}
		return
	}
	if e, name, ok := funcTypeCall(common); ok {
		w.found(n, pos, e, name, "")
		return
	}
	if redisReadDo(common) {
		return
	}
	if common.IsInvoke() {
		named := namedOf(common.Value.Type())
		if named != nil && named.Obj().Pkg() != nil {
			path := named.Obj().Pkg().Path()
			if e, ok := lookup(path, named.Obj().Name(), common.Method.Name()); ok {
				w.found(n, pos, e, fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), common.Method.Name()), "")
				return
			}
			if leaf(path) {
				return
			}
		}
		args := append([]ssa.Value{common.Value}, common.Args...)
		for _, t := range w.p.implementations(common.Value.Type()) {
			g := w.p.prog.LookupMethod(t, common.Method.Pkg(), common.Method.Name())
			if g == nil {
				continue
			}
			if e, name, ok := catalogued(g); ok {
				if !e.Static {
					w.found(n, pos, e, name, "")
				}
				continue
			}
			if !w.skip(g) {
				cn, names := w.callee(n, g, args, nil)
				w.visit(cn, edge{from: n, pos: pos}, names)
			}
		}
		return
	}
	g := common.StaticCallee()
	if g == nil {
		w.dynamic(n, common, pos)
		return // a call through a function value the walk cannot resolve
	}
	if e, name, ok := catalogued(g); ok {
		if e.Kind == KindDatabase && len(common.Args) > 0 && connOfTx(common.Args[0]) {
			return // tx.Conn(): the transaction's own connection
		}
		if e.Kind == KindFile && len(common.Args) > 0 && stdStream(common.Args[0]) {
			return // os.Stdout, os.Stderr: logging
		}
		if readOnlyOpen(g, common.Args) {
			return
		}
		handle := ""
		if e.Kind == KindDatabase && len(common.Args) > 0 {
			handle = w.describe(n, common.Args[0])
		}
		w.found(n, pos, e, name, handle)
		return
	}
	if e, name, ok := beginFunc(g, common.Args); ok {
		w.found(n, pos, e, name, w.describe(n, common.Args[1]))
		return
	}
	if !w.skip(g) {
		mc, _ := common.Value.(*ssa.MakeClosure)
		cn, names := w.callee(n, g, common.Args, mc)
		w.visit(cn, edge{from: n, pos: pos}, names)
	}
	_ = fn
}

// statement judges a statement call by its handle's provenance: inside
// the transaction when the receiver or an argument is derived from it.
func (w *walk) statement(n node, common *ssa.CallCommon, pos token.Pos, name string) {
	for _, v := range statementInputs(common) {
		if w.derived(n, v) {
			return
		}
	}
	h := statementHandle(common, common.StaticCallee())
	desc := "its handle"
	if h != nil {
		desc = w.describe(n, h)
	}
	w.found(n, pos, Entry{Pkg: funcPkgOf(common), Kind: KindDatabase}, name, desc)
}

// dynamic follows a call through a function value loaded from a struct
// field: to every function the program's code stores in that field (a
// constructor's &Client{send: post}).
func (w *walk) dynamic(n node, common *ssa.CallCommon, pos token.Pos) {
	field := fieldOf(common.Value)
	if field == nil {
		return
	}
	for _, g := range w.p.fieldFuncs(field) {
		if w.skip(g) {
			continue
		}
		if e, name, ok := catalogued(g); ok {
			if !e.Static {
				w.found(n, pos, e, name, "")
			}
			continue
		}
		cn, names := w.callee(n, g, common.Args, nil)
		cn.mask |= allInputs &^ freeMask(g) &^ (1<<len(common.Args) - 1)
		w.visit(cn, edge{from: n, pos: pos}, names)
	}
}

// catalogued looks a function up in the catalogue, by its declaration,
// and names it as messages do: (*net/http.Client).Do, os.WriteFile.
func catalogued(g *ssa.Function) (Entry, string, bool) {
	obj, ok := origin(g).Object().(*types.Func)
	if !ok || obj.Pkg() == nil {
		return Entry{}, "", false
	}
	path := obj.Pkg().Path()
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		e, ok := lookup(path, "", obj.Name())
		return e, path + "." + obj.Name(), ok
	}
	rt := sig.Recv().Type()
	ptr := false
	if p, isPtr := types.Unalias(rt).(*types.Pointer); isPtr {
		rt, ptr = p.Elem(), true
	}
	named := namedOf(rt)
	if named == nil {
		return Entry{}, "", false
	}
	e, ok := lookup(path, named.Obj().Name(), obj.Name())
	name := fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), obj.Name())
	if ptr {
		name = fmt.Sprintf("(*%s.%s).%s", path, named.Obj().Name(), obj.Name())
	}
	return e, name, ok
}

// stdStream reports a receiver that is os.Stdout or os.Stderr.
func stdStream(v ssa.Value) bool {
	load, ok := v.(*ssa.UnOp)
	if !ok || load.Op != token.MUL {
		return false
	}
	g, ok := load.X.(*ssa.Global)
	return ok && g.Pkg != nil && g.Pkg.Pkg.Path() == "os" && (g.Name() == "Stdout" || g.Name() == "Stderr")
}

// beginFunc reports pgx.BeginFunc or pgx.BeginTxFunc given a pool or a
// connection: a transaction of its own, committed apart from the method's
// (given the method's pgx.Tx, it is a savepoint inside it).
func beginFunc(g *ssa.Function, args []ssa.Value) (Entry, string, bool) {
	obj, ok := origin(g).Object().(*types.Func)
	if !ok || obj.Pkg() == nil || obj.Pkg().Path() != "github.com/jackc/pgx/v5" || (obj.Name() != "BeginFunc" && obj.Name() != "BeginTxFunc") || len(args) < 2 {
		return Entry{}, "", false
	}
	mi, ok := args[1].(*ssa.MakeInterface)
	if !ok {
		return Entry{}, "", false
	}
	t, ok := types.Unalias(mi.X.Type()).(*types.Pointer)
	if !ok {
		return Entry{}, "", false
	}
	n := namedOf(t.Elem())
	if n == nil || n.Obj().Pkg() == nil {
		return Entry{}, "", false
	}
	e, found := lookup(n.Obj().Pkg().Path(), n.Obj().Name(), "Begin")
	if !found || e.Kind != KindDatabase {
		return Entry{}, "", false
	}
	return e, "github.com/jackc/pgx/v5." + obj.Name(), true
}

// connOfTx reports a receiver that is the result of pgx.Tx's Conn method.
func connOfTx(v ssa.Value) bool {
	c, ok := v.(*ssa.Call)
	if !ok || !c.Call.IsInvoke() || c.Call.Method.Name() != "Conn" {
		return false
	}
	n := namedOf(c.Call.Value.Type())
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/jackc/pgx/v5" && n.Obj().Name() == "Tx"
}

func namedOf(t types.Type) *types.Named {
	n, _ := types.Unalias(t).(*types.Named)
	return n
}

// found records the effect call at pos in fn, with its path.
func (w *walk) found(n node, pos token.Pos, e Entry, callee, handle string) {
	if w.m.Steps && e.Kind != KindDatabase {
		return
	}
	position := w.p.fset.Position(pos)
	key := position.String() + " " + callee
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	f := Finding{Entry: e, Callee: callee, Pos: position, Handle: handle}
	var chain []node
	for g := n; g != w.root && g.fn != nil; g = w.parent[g].from {
		chain = append(chain, g)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		g := chain[i]
		f.Path = append(f.Path, Hop{Func: w.name(g.fn), Pos: w.p.fset.Position(w.parent[g].pos)})
	}
	// A call without a position (in a synthetic wrapper) is placed at the
	// nearest call of the path that has one.
	for i := len(f.Path) - 1; i >= 0 && !f.Pos.IsValid(); i-- {
		f.Pos = f.Path[i].Pos
	}
	for i := len(f.Path) - 1; i > 0; i-- {
		if !f.Path[i].Pos.IsValid() {
			f.Path[i].Pos = f.Path[i-1].Pos
		}
	}
	if dir := w.moduleDir(); dir != "" && !within(dir, f.Pos.Filename) {
		for i := len(f.Path) - 1; i >= 0; i-- {
			if within(dir, f.Path[i].Pos.Filename) {
				f.Exit = f.Path[i].Pos
				break
			}
		}
	}
	f.Allowed, f.AllowedAt = w.allowed(f)
	w.report.Findings = append(w.report.Findings, f)
}

// allowed returns the reason of the //idem:effect-ok comment that allows
// f, on a line of its path or the method's doc comment.
func (w *walk) allowed(f Finding) (string, token.Position) {
	lines := []token.Position{f.Pos}
	for _, h := range f.Path {
		lines = append(lines, h.Pos)
	}
	for _, at := range lines {
		if ok, found := w.p.okAt(at, w.report); found {
			return ok.reason, ok.pos
		}
	}
	return w.docOK, w.docOKPos
}

// name is how messages name fn: Recv.Method or Func, qualified by package
// name outside the checked method's package; closures as the runtime
// names them (Payments.Charge.func1).
func (w *walk) name(fn *ssa.Function) string {
	if fn.Parent() != nil {
		n := 1
		for i, a := range fn.Parent().AnonFuncs {
			if a == fn {
				n = i + 1
			}
		}
		return fmt.Sprintf("%s.func%d", w.name(fn.Parent()), n)
	}
	o := origin(fn)
	obj, _ := o.Object().(*types.Func)
	if obj == nil {
		return fn.String()
	}
	prefix := ""
	if obj.Pkg() != nil && obj.Pkg() != w.pkg {
		prefix = obj.Pkg().Name() + "."
	}
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return prefix + obj.Name()
	}
	rt := sig.Recv().Type()
	if p, ok := types.Unalias(rt).(*types.Pointer); ok {
		rt = p.Elem()
	}
	if n := namedOf(rt); n != nil {
		return prefix + n.Obj().Name() + "." + obj.Name()
	}
	return prefix + obj.Name()
}

// firstError is the first error of pkg or of its dependencies.
func firstError(pkg *packages.Package) string {
	var first string
	packages.Visit([]*packages.Package{pkg}, nil, func(p *packages.Package) {
		if first == "" && len(p.Errors) > 0 {
			first = p.Errors[0].Error()
		}
	})
	return first
}

// catalogued0 looks a call up in the catalogue: an interface method by
// the interface's name, a static callee by its declaration.
func catalogued0(c *ssa.CallCommon) (Entry, string, bool) {
	if c.IsInvoke() {
		named := namedOf(c.Value.Type())
		if named == nil || named.Obj().Pkg() == nil {
			return Entry{}, "", false
		}
		path := named.Obj().Pkg().Path()
		e, ok := lookup(path, named.Obj().Name(), c.Method.Name())
		return e, fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), c.Method.Name()), ok
	}
	if g := c.StaticCallee(); g != nil {
		return catalogued(g)
	}
	return Entry{}, "", false
}

// funcPkgOf is the package of a call's callee.
func funcPkgOf(c *ssa.CallCommon) string {
	if c.IsInvoke() {
		if named := namedOf(c.Value.Type()); named != nil && named.Obj().Pkg() != nil {
			return named.Obj().Pkg().Path()
		}
		return ""
	}
	if g := c.StaticCallee(); g != nil {
		return funcPkg(g)
	}
	return ""
}

// readOnlyOpen reports os.OpenFile given constant flags that neither
// write, create, truncate nor append: a read.
func readOnlyOpen(g *ssa.Function, args []ssa.Value) bool {
	obj, ok := origin(g).Object().(*types.Func)
	if !ok || obj.Pkg() == nil || obj.Pkg().Path() != "os" || obj.Name() != "OpenFile" || len(args) < 2 {
		return false
	}
	k, ok := args[1].(*ssa.Const)
	if !ok || k.Value == nil {
		return false
	}
	flags, exact := constant.Int64Val(k.Value)
	return exact && flags&int64(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0
}

// fieldOf is the struct field a function value is loaded from: s.send in
// s.send(ctx, msg).
func fieldOf(v ssa.Value) *types.Var {
	switch x := v.(type) {
	case *ssa.UnOp:
		if fa, ok := x.X.(*ssa.FieldAddr); ok {
			return structField(fa.X.Type(), fa.Field)
		}
	case *ssa.Field:
		return structField(x.X.Type(), x.Field)
	}
	return nil
}

func structField(t types.Type, i int) *types.Var {
	if p, ok := types.Unalias(t).Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if s, ok := t.Underlying().(*types.Struct); ok && i < s.NumFields() {
		return s.Field(i)
	}
	return nil
}

// storedFuncs indexes the functions code stores into struct fields of
// function type, in the functions given (and the closures they declare).
func storedFuncs(fns []*ssa.Function, into map[*types.Var][]*ssa.Function) {
	var scan func(f *ssa.Function)
	scan = func(f *ssa.Function) {
		for _, b := range f.Blocks {
			for _, instr := range b.Instrs {
				st, ok := instr.(*ssa.Store)
				if !ok {
					continue
				}
				fa, ok := st.Addr.(*ssa.FieldAddr)
				if !ok {
					continue
				}
				g := funcOf(st.Val)
				field := structField(fa.X.Type(), fa.Field)
				if g == nil || field == nil {
					continue
				}
				into[field] = append(into[field], g)
			}
		}
		for _, anon := range f.AnonFuncs {
			scan(anon)
		}
	}
	for _, f := range fns {
		scan(f)
	}
}

// moduleDir is the directory of the checked method's module.
func (w *walk) moduleDir() string {
	if lp := w.p.roots[w.m.Pkg]; lp != nil && lp.Module != nil {
		return lp.Module.Dir
	}
	return ""
}

// within reports a file below dir.
func within(dir, file string) bool {
	return file != "" && strings.HasPrefix(file, dir+string(os.PathSeparator))
}
