package effectwalk

import (
	"fmt"
	"go/constant"
	"go/types"
	"strings"

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

// sqlLibraries are the packages (and those below them) that send SQL on
// a handle they are given: the drivers and database/sql, the ORMs and
// query builders. They are not walked into (a statement's handle is
// judged where the user's code hands it over), and their statement calls
// are judged by the handle's provenance.
var sqlLibraries = []string{
	"database/sql",
	"github.com/jackc/pgx",
	"github.com/lib/pq",
	"github.com/uptrace/bun",
	"gorm.io/gorm",
	"gorm.io/driver",
	"github.com/jmoiron/sqlx",
	"github.com/Masterminds/squirrel",
	"github.com/georgysavva/scany",
}

func sqlLibrary(path string) bool { return under(path, sqlLibraries) }

func under(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// statementNames are, per library, the functions and methods that send a
// statement (or begin a transaction of their own) on the handle they are
// called on or given; builders (NewSelect, Where, Model, sq.Update) are
// not.
var statementNames = map[string][]string{
	"database/sql":                    {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Begin", "BeginTx", "Prepare", "PrepareContext"},
	"github.com/jackc/pgx":            {"Exec", "Query", "QueryRow", "SendBatch", "CopyFrom", "Begin", "BeginTx", "Prepare"},
	"github.com/uptrace/bun":          {"Exec", "Scan", "Count", "ScanAndCount", "Exists", "ExecContext", "QueryContext", "QueryRowContext", "Query", "QueryRow", "Begin", "BeginTx", "RunInTx"},
	"gorm.io/gorm":                    {"Create", "CreateInBatches", "Save", "First", "Take", "Last", "Find", "FindInBatches", "FirstOrInit", "FirstOrCreate", "Update", "Updates", "UpdateColumn", "UpdateColumns", "Delete", "Count", "Row", "Rows", "Scan", "Pluck", "Exec", "Transaction", "Begin"},
	"github.com/jmoiron/sqlx":         {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Queryx", "QueryxContext", "QueryRowx", "QueryRowxContext", "Get", "GetContext", "Select", "SelectContext", "NamedExec", "NamedExecContext", "NamedQuery", "NamedQueryContext", "MustExec", "MustExecContext", "Begin", "BeginTx", "Beginx", "BeginTxx", "MustBegin", "MustBeginTx"},
	"github.com/Masterminds/squirrel": {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Scan", "ScanContext"},
	"github.com/georgysavva/scany":    {"Select", "Get"},
}

// builderFuncs are package functions of the libraries above that start a
// builder from nothing (squirrel's sq.Update): never statements.
func statementCall(pkg, name string) bool {
	for lib, names := range statementNames {
		if pkg != lib && !strings.HasPrefix(pkg, lib+"/") {
			continue
		}
		for _, n := range names {
			if n == name {
				return true
			}
		}
	}
	return false
}

// handleInterfaceCall reports a call of a statement method on an
// interface declared outside the SQL libraries (sqlc's DBTX, a service's
// own "querier"): one named like a pgx or database/sql statement method
// whose results include a pgx, pgconn or database/sql type.
func handleInterfaceCall(m *types.Func) bool {
	name := m.Name()
	found := false
	for _, n := range append(append([]string{}, pgxCalls...), sqlCalls...) {
		if n == name {
			found = true
		}
	}
	if !found {
		return false
	}
	res := m.Type().(*types.Signature).Results()
	for i := 0; i < res.Len(); i++ {
		t := derefType(res.At(i).Type())
		if n := namedOf(t); n != nil && n.Obj().Pkg() != nil {
			p := n.Obj().Pkg().Path()
			if p == "database/sql" || under(p, []string{"github.com/jackc/pgx"}) {
				return true
			}
		}
	}
	return false
}

// statementInputs are the values whose provenance decides where a
// statement call runs: its receiver and arguments.
func statementInputs(c *ssa.CallCommon) []ssa.Value {
	var vs []ssa.Value
	if c.IsInvoke() {
		vs = append(vs, c.Value)
	}
	for _, a := range c.Args {
		if handleLike(a.Type()) && !isContext(a.Type()) {
			vs = append(vs, a)
		}
	}
	return vs
}

func isContext(t types.Type) bool {
	n := namedOf(t)
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}

// statementHandle is the value a statement is sent through, for its
// description: the receiver, or the first argument that can be a handle.
func statementHandle(c *ssa.CallCommon, static *ssa.Function) ssa.Value {
	if c.IsInvoke() {
		return c.Value
	}
	if static != nil && static.Signature.Recv() != nil && len(c.Args) > 0 {
		return c.Args[0]
	}
	for _, a := range c.Args {
		if handleLike(a.Type()) && !isContext(a.Type()) {
			return a
		}
	}
	return nil
}

// statement reports a call that sends a statement whose place (inside or
// outside the transaction) follows the handle's provenance, with the
// callee's name for messages.
func statement(c *ssa.CallCommon) (string, bool) {
	if c.IsInvoke() {
		named := namedOf(c.Value.Type())
		if named == nil || named.Obj().Pkg() == nil {
			return "", false
		}
		path := named.Obj().Pkg().Path()
		name := fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), c.Method.Name())
		if sqlLibrary(path) {
			return name, statementCall(path, c.Method.Name())
		}
		return name, handleInterfaceCall(c.Method)
	}
	g := c.StaticCallee()
	if g == nil {
		return "", false
	}
	path := funcPkg(g)
	if !sqlLibrary(path) {
		return "", false
	}
	obj, ok := origin(g).Object().(*types.Func)
	if !ok {
		return "", false
	}
	return qualifiedName(obj), statementCall(path, obj.Name())
}

// qualifiedName names a function as messages do: (*database/sql.Tx).Exec,
// github.com/georgysavva/scany/v2/pgxscan.Select.
func qualifiedName(obj *types.Func) string {
	path := obj.Pkg().Path()
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return path + "." + obj.Name()
	}
	rt := sig.Recv().Type()
	star := ""
	if p, ok := types.Unalias(rt).(*types.Pointer); ok {
		rt, star = p.Elem(), "*"
	}
	if n := namedOf(rt); n != nil {
		return fmt.Sprintf("(%s%s.%s).%s", star, path, n.Obj().Name(), obj.Name())
	}
	return path + "." + obj.Name()
}

// rueidisCall reports a rueidis Do or DoMulti call and whether it
// writes: the command's name is the builder method chained on B()
// (client.B().Set().Key("k").Value("v").Build() is SET); a command the
// walk cannot read counts as a write.
func rueidisCall(c *ssa.CallCommon) (callee string, write, ok bool) {
	var name string
	var args []ssa.Value
	if c.IsInvoke() {
		named := namedOf(c.Value.Type())
		if named == nil || named.Obj().Pkg() == nil || !under(named.Obj().Pkg().Path(), []string{"github.com/redis/rueidis"}) {
			return "", false, false
		}
		name = c.Method.Name()
		callee = fmt.Sprintf("(%s.%s).%s", named.Obj().Pkg().Path(), named.Obj().Name(), name)
		args = c.Args
	} else {
		g := c.StaticCallee()
		if g == nil || !under(funcPkg(g), []string{"github.com/redis/rueidis"}) || g.Signature.Recv() == nil {
			return "", false, false
		}
		obj, isFunc := origin(g).Object().(*types.Func)
		if !isFunc {
			return "", false, false
		}
		name = obj.Name()
		callee = qualifiedName(obj)
		if len(c.Args) > 0 {
			args = c.Args[1:]
		}
	}
	if name != "Do" && name != "DoMulti" && name != "DoStream" && name != "DoMultiStream" {
		return "", false, false
	}
	if len(args) < 2 {
		return callee, true, true
	}
	cmds := []ssa.Value{args[1]}
	if name == "DoMulti" || name == "DoMultiStream" {
		cmds = sliceElems(args[1])
		if cmds == nil {
			return callee, true, true
		}
	}
	for _, v := range cmds {
		cmd, known := rueidisCommand(v)
		if !known || rueidisWrite(cmd) {
			if known {
				callee += " " + strings.ToUpper(cmd)
			}
			return callee, true, true
		}
	}
	return callee, false, true
}

// rueidisCommand follows a built command back to the builder method that
// named it.
func rueidisCommand(v ssa.Value) (string, bool) {
	for depth := 0; depth < 64; depth++ {
		switch x := v.(type) {
		case *ssa.Call:
			if x.Call.IsInvoke() {
				return "", false
			}
			g := x.Call.StaticCallee()
			if g == nil || g.Signature.Recv() == nil || len(x.Call.Args) == 0 {
				return "", false
			}
			if n := namedOf(derefType(g.Signature.Recv().Type())); n != nil && n.Obj().Name() == "Builder" {
				return g.Name(), true
			}
			v = x.Call.Args[0]
		case *ssa.ChangeType:
			v = x.X
		case *ssa.Convert:
			v = x.X
		case *ssa.UnOp:
			v = x.X
		default:
			return "", false
		}
	}
	return "", false
}

// sliceElems are the values stored in the array a variadic slice was made
// from, nil when it was not made there.
func sliceElems(v ssa.Value) []ssa.Value {
	s, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	arr, ok := s.X.(*ssa.Alloc)
	if !ok || arr.Referrers() == nil {
		return nil
	}
	var out []ssa.Value
	for _, r := range *arr.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok || ia.Referrers() == nil {
			continue
		}
		for _, rr := range *ia.Referrers() {
			if st, ok := rr.(*ssa.Store); ok && st.Addr == ia {
				out = append(out, st.Val)
			}
		}
	}
	return out
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

// redisReadDo reports a go-redis Do given a constant command name that
// does not write (rdb.Do(ctx, "GET", k)): not an effect.
func redisReadDo(c *ssa.CallCommon) bool {
	var name string
	var args []ssa.Value
	if c.IsInvoke() {
		name, args = c.Method.Name(), c.Args
	} else if g := c.StaticCallee(); g != nil && g.Signature.Recv() != nil && len(c.Args) > 0 {
		name, args = g.Name(), c.Args[1:]
	}
	if name != "Do" || len(args) < 2 || !under(funcPkgOf(c), []string{"github.com/redis/go-redis", "github.com/go-redis/redis"}) {
		return false
	}
	elems := sliceElems(args[1])
	if len(elems) == 0 {
		return false
	}
	v := elems[0]
	if mi, ok := v.(*ssa.MakeInterface); ok {
		v = mi.X
	}
	k, ok := v.(*ssa.Const)
	if !ok || k.Value == nil || k.Value.Kind() != constant.String {
		return false
	}
	return !rueidisWrite(constant.StringVal(k.Value))
}
