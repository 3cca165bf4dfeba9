package effectwalk

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"os"

	"golang.org/x/tools/go/ssa"
)

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

// funcTypeCall reports a call through a value of a catalogued function
// type (es.Index(…), a field of type esapi.Index).
func funcTypeCall(c *ssa.CallCommon) (Entry, string, bool) {
	if c.IsInvoke() || c.StaticCallee() != nil {
		return Entry{}, "", false
	}
	n := namedOf(c.Value.Type())
	if n == nil || n.Obj().Pkg() == nil {
		return Entry{}, "", false
	}
	e, ok := funcEntry(n.Obj().Pkg().Path(), n.Obj().Name())
	return e, n.Obj().Pkg().Path() + "." + n.Obj().Name(), ok
}

func derefType(t types.Type) types.Type {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}
