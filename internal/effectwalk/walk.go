package effectwalk

import (
	"fmt"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

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
