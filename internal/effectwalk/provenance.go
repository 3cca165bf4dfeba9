package effectwalk

import (
	"fmt"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// Provenance of database handles: a statement is inside the method's
// transaction when the handle it is sent through is derived from the
// transaction, whatever types implement the handle's interface. A value's
// derivation is read from its function's SSA, and expressed over the
// function's inputs (its parameters, then its free variables): bit i of a
// flow is set when the value may be derived from input i. The caller
// resolves the inputs: the checked method's transaction parameter is the
// only source, and a value is derived from it when it is the transaction
// or made from it:
//
//   - converted, asserted or put in an interface (tx as sqlc's DBTX, as
//     bun.IConn);
//   - the result of a call given it, as receiver or argument (sqlc's
//     q.WithTx(tx) and New(tx), bun's .Conn(tx), squirrel's .RunWith(tx),
//     tx.Conn(), a builder chained on any of these);
//   - a struct, or a handle, that had it stored in one of its fields (a
//     composite literal &sqlx.Tx{Tx: tx}, GORM's db.Statement.ConnPool =
//     tx, postgres.Config{Conn: tx});
//   - a value that may be one of these (a φ-node: either branch).
//
// Anything else (a field of the receiver such as s.q or s.db, a package
// variable, a function's result not given the transaction, a pool) is
// not, and a statement through it is refused, naming that origin.
type flows struct {
	memo map[ssa.Value]uint64
	busy map[ssa.Value]bool
}

func newFlows() *flows {
	return &flows{memo: map[ssa.Value]uint64{}, busy: map[ssa.Value]bool{}}
}

// allInputs marks every input of a function entered without a call to
// read its arguments from (a callback, a function value): their origin is
// unknown, and a statement through one is taken to be inside.
const allInputs = ^uint64(0)

// inputBit is the bit of a parameter or free variable of fn.
func inputBit(v ssa.Value) uint64 {
	switch v := v.(type) {
	case *ssa.Parameter:
		for i, p := range v.Parent().Params {
			if p == v && i < 64 {
				return 1 << i
			}
		}
	case *ssa.FreeVar:
		fn := v.Parent()
		for i, p := range fn.FreeVars {
			if p == v && len(fn.Params)+i < 64 {
				return 1 << (len(fn.Params) + i)
			}
		}
	}
	return 0
}

// of is the flow of v: the inputs of its function it may be derived from.
func (fl *flows) of(v ssa.Value) uint64 {
	if v == nil {
		return 0
	}
	if f, ok := fl.memo[v]; ok {
		return f
	}
	if fl.busy[v] {
		return 0
	}
	fl.busy[v] = true
	f := fl.compute(v)
	delete(fl.busy, v)
	fl.memo[v] = f
	return f
}

func (fl *flows) compute(v ssa.Value) uint64 {
	switch v := v.(type) {
	case *ssa.Parameter, *ssa.FreeVar:
		return inputBit(v) | fl.stores(v, 5)
	case *ssa.MakeInterface:
		return fl.of(v.X)
	case *ssa.ChangeType:
		return fl.of(v.X)
	case *ssa.ChangeInterface:
		return fl.of(v.X)
	case *ssa.Convert:
		return fl.of(v.X)
	case *ssa.TypeAssert:
		return fl.of(v.X)
	case *ssa.Extract:
		return fl.of(v.Tuple)
	case *ssa.Slice:
		return fl.of(v.X)
	case *ssa.Field:
		return fl.of(v.X)
	case *ssa.FieldAddr:
		return fl.of(v.X)
	case *ssa.UnOp:
		if v.Op.String() != "*" {
			return 0
		}
		return fl.load(v.X)
	case *ssa.Phi:
		var f uint64
		for _, e := range v.Edges {
			f |= fl.of(e)
		}
		return f
	case *ssa.Alloc:
		return fl.stores(v, 5)
	case *ssa.Call:
		var f uint64
		if !v.Call.IsInvoke() {
			if mc, ok := v.Call.Value.(*ssa.MakeClosure); ok {
				for _, b := range mc.Bindings {
					f |= fl.of(b)
				}
			}
		} else if handleLike(v.Call.Value.Type()) {
			f |= fl.of(v.Call.Value)
		}
		for _, a := range v.Call.Args {
			if handleLike(a.Type()) {
				f |= fl.of(a)
			}
		}
		return f | fl.stores(v, 5)
	}
	return 0
}

// load is the flow of what is read through the address addr: for a field
// of a struct, what is stored in that field and where the struct comes
// from; for a variable, what is stored in it.
func (fl *flows) load(addr ssa.Value) uint64 {
	switch a := addr.(type) {
	case *ssa.FieldAddr:
		return fl.fieldStores(a.X, a.Field) | fl.base(a.X)
	case *ssa.Alloc:
		return fl.stores(a, 5)
	}
	return fl.of(addr)
}

// base is the flow of a struct's address without the stores into its
// fields: where the struct itself comes from.
func (fl *flows) base(v ssa.Value) uint64 {
	switch v := v.(type) {
	case *ssa.Parameter, *ssa.FreeVar:
		return inputBit(v)
	case *ssa.Alloc:
		return 0
	case *ssa.FieldAddr:
		return fl.load(v)
	case *ssa.UnOp:
		return fl.of(v)
	}
	return fl.of(v)
}

// fieldStores is the flow of the values stored into field i of the
// struct x points to.
func (fl *flows) fieldStores(x ssa.Value, i int) uint64 {
	var f uint64
	refs := x.Referrers()
	if refs == nil {
		return 0
	}
	for _, r := range *refs {
		fa, ok := r.(*ssa.FieldAddr)
		if !ok || fa.X != x || fa.Field != i {
			continue
		}
		f |= fl.stores(fa, 5)
	}
	return f
}

// stores is the flow of the values stored through the address v, into
// it or its fields, depth levels down (through the loads of pointer
// fields: db.Statement.ConnPool = tx).
func (fl *flows) stores(v ssa.Value, depth int) uint64 {
	if depth == 0 {
		return 0
	}
	refs := v.Referrers()
	if refs == nil {
		return 0
	}
	var f uint64
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Addr == v && handleLike(r.Val.Type()) {
				f |= fl.of(r.Val)
			}
		case *ssa.FieldAddr:
			if r.X == v {
				f |= fl.stores(r, depth-1)
			}
		case *ssa.IndexAddr:
			if r.X == v {
				f |= fl.stores(r, depth-1)
			}
		case *ssa.UnOp:
			if r.X == v && r.Op.String() == "*" {
				if _, ok := r.Type().Underlying().(*types.Pointer); ok {
					f |= fl.stores(r, depth-1)
				}
			}
		}
	}
	return f
}

// handleLike reports a type that can carry a database handle: not a
// number, a string or a boolean (a row count read on the transaction
// does not make what it is passed to a transaction's).
func handleLike(t types.Type) bool {
	_, basic := t.Underlying().(*types.Basic)
	return !basic
}

// handle describes where a value comes from, for messages: a path from an
// input of its function (Param >= 0: "" + Path appended to the input's
// name, which the caller supplies) or a complete text (Param < 0).
type handle struct {
	Param int
	Path  string
}

// describe says where v comes from: s.db, s.q.db, pgxpool.New, a
// package variable.
func describe(v ssa.Value) handle {
	for depth := 0; depth < 16; depth++ {
		switch x := v.(type) {
		case *ssa.Parameter:
			for i, p := range x.Parent().Params {
				if p == x {
					return handle{Param: i}
				}
			}
			return handle{Param: -1, Path: x.Name()}
		case *ssa.FreeVar:
			fn := x.Parent()
			for i, p := range fn.FreeVars {
				if p == x {
					return handle{Param: len(fn.Params) + i}
				}
			}
			return handle{Param: -1, Path: x.Name()}
		case *ssa.MakeInterface:
			v = x.X
		case *ssa.ChangeType:
			v = x.X
		case *ssa.ChangeInterface:
			v = x.X
		case *ssa.Convert:
			v = x.X
		case *ssa.TypeAssert:
			v = x.X
		case *ssa.Extract:
			v = x.Tuple
		case *ssa.UnOp:
			if fa, ok := x.X.(*ssa.FieldAddr); ok {
				h := describe(fa.X)
				h.Path += "." + fieldName(fa.X.Type(), fa.Field)
				return h
			}
			if g, ok := x.X.(*ssa.Global); ok {
				return handle{Param: -1, Path: "the package variable " + g.Pkg.Pkg.Name() + "." + g.Name()}
			}
			v = x.X
		case *ssa.Field:
			h := describe(x.X)
			h.Path += "." + fieldName(x.X.Type(), x.Field)
			return h
		case *ssa.Call:
			// A builder or query chained on a handle comes from it.
			callee := x.Call.StaticCallee()
			if x.Call.IsInvoke() {
				v = x.Call.Value
				continue
			}
			if callee != nil && callee.Signature.Recv() != nil && len(x.Call.Args) > 0 && sqlLibrary(funcPkg(callee)) {
				v = x.Call.Args[0]
				if n := callee.Name(); (n == "Conn" || n == "RunWith") && len(x.Call.Args) > 1 {
					v = x.Call.Args[1] // the handle the builder is rebound to
				}
				continue
			}
			name := "a function value"
			if callee != nil {
				name = funcName(callee)
			}
			return handle{Param: -1, Path: "the result of " + name}
		case *ssa.Phi:
			return handle{Param: -1, Path: "a value that is not the transaction on every path"}
		case *ssa.Alloc:
			return handle{Param: -1, Path: "a " + types.TypeString(derefType(x.Type()), qualifier) + " made without the transaction"}
		default:
			return handle{Param: -1, Path: v.Name()}
		}
	}
	return handle{Param: -1, Path: v.Name()}
}

// render writes a handle description given the names of its function's
// inputs (nil: their own names).
func (h handle) render(fn *ssa.Function, inputs []string) string {
	if h.Param < 0 {
		return h.Path
	}
	if h.Param < len(inputs) && inputs[h.Param] != "" {
		return inputs[h.Param] + h.Path
	}
	if fn != nil {
		if h.Param < len(fn.Params) {
			return fn.Params[h.Param].Name() + h.Path
		}
		if i := h.Param - len(fn.Params); i < len(fn.FreeVars) {
			return fn.FreeVars[i].Name() + h.Path
		}
	}
	return "a parameter" + h.Path
}

func fieldName(t types.Type, i int) string {
	if p, ok := types.Unalias(t).Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if s, ok := t.Underlying().(*types.Struct); ok && i < s.NumFields() {
		return s.Field(i).Name()
	}
	return fmt.Sprintf("field%d", i)
}

func qualifier(p *types.Package) string { return p.Name() }

func funcPkg(fn *ssa.Function) string {
	if obj, ok := origin(fn).Object().(*types.Func); ok && obj.Pkg() != nil {
		return obj.Pkg().Path()
	}
	if fn.Pkg != nil {
		return fn.Pkg.Pkg.Path()
	}
	return ""
}

// funcName names a function for a message: pkg.Func or pkg.Type.Method.
func funcName(fn *ssa.Function) string {
	obj, ok := origin(fn).Object().(*types.Func)
	if !ok || obj.Pkg() == nil {
		return fn.Name()
	}
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return obj.Pkg().Name() + "." + obj.Name()
	}
	if n := namedOf(derefType(sig.Recv().Type())); n != nil {
		return obj.Pkg().Name() + "." + n.Obj().Name() + "." + obj.Name()
	}
	return obj.Pkg().Name() + "." + obj.Name()
}
