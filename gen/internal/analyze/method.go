package analyze

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// method checks one annotated method and returns its model, or nil.
func (b *builder) method(d *directive.Directive, decl *ast.FuncDecl) *ir.Method {
	fn, sig, recv := b.resolve(d, decl)
	if fn == nil {
		return nil
	}
	namePos := b.l.Pkg.Fset.Position(decl.Name.Pos())
	m := &ir.Method{
		Receiver: recv.Obj().Name(), Name: fn.Name(), Pos: d.Pos.String(),
		Retention: d.Retention, LockTimeout: d.LockTimeout, FinalErrors: d.FinalErrors, Storm: d.Storm,
	}
	m.Key = m.Receiver + "." + m.Name
	m.Ledger = ledgerName(b.l.Pkg.PkgPath, m.Receiver, m.Name)
	if !fn.Exported() {
		b.e.Add(namePos, "method %s is unexported: the wrapper exposes a method of the same name, so export it (or wrap an exported method that calls it)", m.Key)
	}
	ok := true
	if sig.Variadic() {
		b.e.Add(namePos, "%s is variadic: a variadic call cannot be fingerprinted reliably; take a slice parameter instead", m.Key)
		ok = false
	}
	first, modeOK := b.mode(d, m, sig, namePos)
	if first < 0 {
		return nil
	}
	ok = modeOK && ok
	ok = b.results(m, sig, namePos) && ok
	ok = b.params(m, sig, first) && ok
	ok = b.finalErrors(d) && ok
	ok = ok && b.requestKey(d, m, sig, first)
	if (d.Inline != "" || d.Lookup != "") && !b.inline(d, m, recv, sig) {
		ok = false
	}
	if !ok {
		return nil
	}
	b.wantFixtures(d.Pos, m, first)
	return m
}

// resolve finds the annotated method's function, signature and receiver
// type, and records the files the generated code will refer to for it; fn
// is nil when the method cannot be generated for (reported, or the
// signature did not type-check: b.invalid).
func (b *builder) resolve(d *directive.Directive, decl *ast.FuncDecl) (fn *types.Func, sig *types.Signature, recv *types.Named) {
	fn, _ = b.l.Pkg.TypesInfo.Defs[decl.Name].(*types.Func)
	if fn == nil {
		b.e.Add(d.Pos, "cannot resolve method %s", decl.Name.Name)
		return nil, nil, nil
	}
	sig = fn.Type().(*types.Signature)
	namePos := b.l.Pkg.Fset.Position(decl.Name.Pos())
	if strings.Contains(types.TypeString(sig, nil), "invalid type") {
		b.invalid = true
		return nil, nil, nil
	}
	rt := sig.Recv().Type()
	if p, ok := rt.(*types.Pointer); ok {
		rt = p.Elem()
	}
	recv, ok := types.Unalias(rt).(*types.Named)
	if !ok {
		b.e.Add(namePos, "cannot read the receiver type of %s", decl.Name.Name)
		return nil, nil, nil
	}
	if recv.TypeParams().Len() > 0 {
		b.e.Add(namePos, "%s has a generic receiver %s: idemgen wraps methods of non-generic types only; move the method to a concrete type", decl.Name.Name, recv.Obj().Name())
		return nil, nil, nil
	}
	b.referObj(fn)
	b.refer(recv)
	b.refer(sig)
	if d.Lookup != "" {
		if obj, _, _ := types.LookupFieldOrMethod(recv, true, b.pkg, d.Lookup); obj != nil {
			b.referObj(obj)
		}
	}
	for _, n := range d.FinalErrors {
		if obj := b.pkg.Scope().Lookup(n); obj != nil {
			b.referObj(obj)
		}
	}
	return fn, sig, recv
}

// mode decides m's mode from its parameters (a transaction after ctx,
// pgx.Tx or *sql.Tx: atomic; none: external) and checks it against -mode
// and -lock-timeout. It returns the index of the first fingerprinted
// parameter, -1 when the method takes no context.Context (and nothing else
// can be checked), and whether the parameters fit the mode.
func (b *builder) mode(d *directive.Directive, m *ir.Method, sig *types.Signature, namePos token.Position) (int, bool) {
	params := sig.Params()
	if params.Len() == 0 || !isNamed(params.At(0).Type(), "context", "Context") {
		b.e.Add(namePos, "%s must take a context.Context as its first parameter: the idempotency key and scope travel in it (idem.ContextWithKey, idem.ContextWithScope)", m.Key)
		return -1, false
	}
	ok := true
	first := 1
	tx := ir.TxNone
	if params.Len() > 1 {
		tx = txKind(params.At(1).Type())
	}
	hasTx := tx != ir.TxNone
	switch {
	case d.Mode == string(ir.ModeAtomic) && !hasTx:
		b.e.Add(d.Pos, "-mode=atomic needs a transaction as the second parameter of %s, so the claim and the work commit together; add tx pgx.Tx (or tx *sql.Tx on database/sql) or drop -mode to use external mode", m.Key)
		ok = false
	case d.Mode == string(ir.ModeExternal) && hasTx:
		b.e.Add(d.Pos, "-mode=external runs %s outside any transaction, but it takes a %s; remove the tx parameter or drop -mode to use atomic mode", m.Key, txSource(tx))
		ok = false
	}
	m.Tx = tx
	if hasTx {
		m.Mode = ir.ModeAtomic
		first = 2
	} else {
		m.Mode = ir.ModeExternal
	}
	if m.Mode == ir.ModeAtomic && d.IsSet("lock-timeout") {
		b.e.Add(d.Pos, "-lock-timeout applies to external-mode methods only; %s runs in one transaction (it takes a %s), so remove -lock-timeout", m.Key, txSource(tx))
		ok = false
	}
	for i := 1; i < params.Len(); i++ {
		if i > 1 || !hasTx {
			if k := txKind(params.At(i).Type()); k != ir.TxNone {
				b.e.Add(b.l.Pkg.Fset.Position(params.At(i).Pos()), "%s takes a %s as parameter %d: the transaction must come right after ctx (atomic mode)", m.Key, txSource(k), i+1)
				ok = false
			}
		}
	}
	return first, ok
}

// txKind is the kind of transaction t is: a pgx.Tx, a *sql.Tx, or neither.
func txKind(t types.Type) ir.Tx {
	if isNamed(t, ir.PgxPath, "Tx") {
		return ir.TxPgx
	}
	if p, isPtr := types.Unalias(t).(*types.Pointer); isPtr && isNamed(p.Elem(), ir.SQLPath, "Tx") {
		return ir.TxSQL
	}
	return ir.TxNone
}

// txSource is a transaction kind's type as Go source spells it.
func txSource(k ir.Tx) string {
	if k == ir.TxSQL {
		return "*sql.Tx"
	}
	return "pgx.Tx"
}

// results checks that m returns (R, error) or error, and that R survives
// the JSON round trip (checkResponse).
func (b *builder) results(m *ir.Method, sig *types.Signature, namePos token.Position) bool {
	res := sig.Results()
	switch {
	case res.Len() == 0 || !isError(res.At(res.Len()-1).Type()):
		b.e.Add(namePos, "%s must return error as its last result (R, error) or error: failures are how a retry knows to run again", m.Key)
		return false
	case res.Len() > 2:
		b.e.Add(namePos, "%s returns %d results: return (R, error) or error; put several values in a struct", m.Key, res.Len())
		return false
	case res.Len() == 2:
		r := res.At(0)
		if done, ok := b.protoResult(m, r); done {
			return ok
		}
		if !b.checkResponse(r.Type(), b.l.Pkg.Fset.Position(r.Pos()), "the response "+types.TypeString(r.Type(), types.RelativeTo(b.pkg))) {
			return false
		}
		m.Result = b.render(r.Type())
	}
	return true
}

// params adds the parameters after ctx (and tx), all fingerprinted, in
// order, to m, checking that each can be fingerprinted (fpWalk).
func (b *builder) params(m *ir.Method, sig *types.Signature, first int) bool {
	params, res := sig.Params(), sig.Results()
	pkgNames := map[string]bool{}
	for i := 0; i < params.Len(); i++ {
		packageNames(params.At(i).Type(), pkgNames)
	}
	for i := 0; i < res.Len(); i++ {
		packageNames(res.At(i).Type(), pkgNames)
	}
	ok := true
	used := map[string]bool{}
	walk := &fpWalk{b: b, m: m}
	for i := first; i < params.Len(); i++ {
		v := params.At(i)
		name := v.Name()
		if name == "" || name == "_" {
			name = fmt.Sprintf("arg%d", i-first+1)
		}
		local := b.paramLocal(name, i-first+1, used, pkgNames)
		walk.pos, walk.param = b.l.Pkg.Fset.Position(v.Pos()), len(m.Params)
		switch {
		case txKind(v.Type()) != ir.TxNone:
			ok = false // reported by mode: a transaction is not a request to fingerprint
		case b.foreignTx(walk.pos, m, v.Type(), i+1):
			ok = false
		case !walk.check(v.Type(), name, []string{}, map[string]bool{}):
			ok = false
		}
		m.Params = append(m.Params, ir.Param{Name: name, Local: local, Type: b.render(v.Type()), Source: types.TypeString(v.Type(), b.qualifier),
			ProtoOmit: walk.requestID(v.Type(), name)})
	}
	m.Encoding = walk.encoding()
	return ok
}

// finalErrors checks that every -final-errors name is a package-level error
// variable.
func (b *builder) finalErrors(d *directive.Directive) bool {
	ok := true
	for _, n := range d.FinalErrors {
		obj := b.pkg.Scope().Lookup(n)
		v, isVar := obj.(*types.Var)
		switch {
		case obj == nil:
			b.e.Add(d.Pos, "-final-errors: %s is not declared in package %s; declare it as a package-level sentinel, e.g. var %s = errors.New(\"...\")", n, b.pkg.Name(), n)
			ok = false
		case !isVar:
			b.e.Add(d.Pos, "-final-errors: %s is a %s, not a package-level error variable; declare var %s = errors.New(\"...\")", n, kindOf(obj), n)
			ok = false
		case !types.Implements(v.Type(), errorType()) && !types.Implements(types.NewPointer(v.Type()), errorType()):
			b.e.Add(d.Pos, "-final-errors: %s has type %s, which is not an error; name a package-level error variable", n, types.TypeString(v.Type(), types.RelativeTo(b.pkg)))
			ok = false
		}
	}
	return ok
}

// paramLocal picks the identifier generated code gives the n-th argument,
// declared as name (names.Local): nothing the generated code declares or
// refers to inside a function (its own locals, the imported packages,
// package-level declarations, the generated identifiers) can then be
// hidden by an argument.
func (b *builder) paramLocal(name string, n int, used, pkgNames map[string]bool) string {
	local := names.Local(name, n, func(s string) bool {
		return !used[s] && !pkgNames[s] && b.pkg.Scope().Lookup(s) == nil
	})
	used[local] = true
	return local
}

// packageNames adds the names of the packages whose types t spells out,
// which generated code refers to by those names.
func packageNames(t types.Type, into map[string]bool) {
	switch u := t.(type) {
	case *types.Alias:
		packageNames(types.Unalias(u), into)
	case *types.Named:
		if u.Obj().Pkg() != nil {
			into[u.Obj().Pkg().Name()] = true
		}
		for i := 0; i < u.TypeArgs().Len(); i++ {
			packageNames(u.TypeArgs().At(i), into)
		}
	case *types.Pointer:
		packageNames(u.Elem(), into)
	case *types.Slice:
		packageNames(u.Elem(), into)
	case *types.Array:
		packageNames(u.Elem(), into)
	case *types.Chan:
		packageNames(u.Elem(), into)
	case *types.Map:
		packageNames(u.Key(), into)
		packageNames(u.Elem(), into)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			packageNames(u.Field(i).Type(), into)
		}
	case *types.Signature:
		for _, tup := range []*types.Tuple{u.Params(), u.Results()} {
			for i := 0; i < tup.Len(); i++ {
				packageNames(tup.At(i).Type(), into)
			}
		}
	case *types.Interface:
		for i := 0; i < u.NumEmbeddeds(); i++ {
			packageNames(u.EmbeddedType(i), into)
		}
		for i := 0; i < u.NumExplicitMethods(); i++ {
			packageNames(u.ExplicitMethod(i).Type(), into)
		}
	case *types.Basic:
		if u.Kind() == types.UnsafePointer {
			into["unsafe"] = true
		}
	}
}

func errorType() *types.Interface {
	return types.Universe.Lookup("error").Type().Underlying().(*types.Interface)
}

func kindOf(o types.Object) string {
	switch o.(type) {
	case *types.Const:
		return "constant"
	case *types.TypeName:
		return "type"
	case *types.Func:
		return "function"
	}
	return "declaration"
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isError(t types.Type) bool {
	return types.Identical(types.Unalias(t), types.Universe.Lookup("error").Type())
}
