// Package analyze turns a loaded package into its model (package ir): it
// checks every directive and annotated method (signature and mode, the
// fingerprint plan, the JSON round trip of the response, the fixtures the
// generated tests call, inline mode, ledger names) and returns facts with
// positions. It writes no generated code and no doc prose, and names
// generated identifiers only through package names.
package analyze

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/internal/load"
	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// builder builds the model of one package.
type builder struct {
	l     *load.Package
	pkg   *types.Package
	e     *diag.Errs
	named map[string]*ir.Named // by qualified type string
	model *ir.Package

	fixtures    []fixtureWant
	fixtureSeen map[string]bool
	invalid     bool // an annotated signature holds a type that did not type-check

	referred map[string]bool // files declaring what the generated code refers to (see refer)
	walked   map[types.Type]bool
}

// Package checks every idemgen directive of a loaded package and returns
// its model. A package without directives returns (nil, nil).
func Package(l *load.Package) (*ir.Package, diag.ErrorList) {
	e := &diag.Errs{}
	p := l.Pkg
	if fatal := fatalErrors(p); len(fatal) > 0 {
		reportBuildErrors(e, p, fatal)
		return nil, e.List
	}
	fs := directive.Find(p.Fset, p.Syntax, e)
	if len(fs) == 0 {
		return nil, e.List
	}
	b := &builder{l: l, pkg: p.Types, e: e, named: map[string]*ir.Named{}, fixtureSeen: map[string]bool{},
		referred: map[string]bool{}, walked: map[types.Type]bool{}}
	m := b.packageModel(fs)
	b.methods(fs)
	b.checkInlineTables(m.Receivers)
	if b.invalid {
		var typeErrs []packages.Error
		for _, pe := range p.Errors {
			if isTypeError(pe) {
				typeErrs = append(typeErrs, pe)
			}
		}
		reportBuildErrors(e, p, typeErrs)
		return nil, e.List
	}
	files := load.SortedKeys(b.referred)
	c, err := load.CombinedConstraint(files)
	if err != nil {
		e.Add(load.PositionOf(files[0]), "%v", err)
		return nil, e.List
	}
	m.Constraint = c
	b.collectNamed()
	if m.Tests {
		b.checkFixtures()
	}
	if len(e.List) > 0 {
		return nil, e.List
	}
	return m, nil
}

// fatalErrors are the load errors that stop generation. Type errors are
// expected while outputs are stale or absent: the package's own code may
// call the wrappers idemgen is about to write (idemgen reads its own files
// as empty). They only stop generation when an annotated method's signature
// cannot be read (builder.invalid). Parse errors and go command failures
// always do, except the compiler's report ("# pkg" ...) of the real files,
// which this type-check of the files as idemgen reads them supersedes.
func fatalErrors(p *packages.Package) []packages.Error {
	var fatal []packages.Error
	for _, pe := range p.Errors {
		if pe.Kind == packages.ParseError || pe.Kind == packages.ListError && !strings.HasPrefix(pe.Msg, "# ") {
			fatal = append(fatal, pe)
		}
	}
	return fatal
}

// packageModel starts the model with the package-level settings the
// directives fs agree on.
func (b *builder) packageModel(fs []directive.Found) *ir.Package {
	p := b.l.Pkg
	var ds []*directive.Directive
	for _, f := range fs {
		ds = append(ds, f.D)
	}
	st := directive.MergeSettings(ds, b.e)
	dir := ""
	if len(p.GoFiles) > 0 {
		dir = filepath.Dir(p.GoFiles[0])
	}
	m := &ir.Package{Path: p.PkgPath, Name: p.Name, Dir: dir, MigrationFormat: st.Format, Tests: st.Tests,
		MigrationsDir: filepath.ToSlash(filepath.Clean(st.Migrations)), Distributed: st.Distributed}
	b.model = m
	if l, err := ledger.New(st.Table); err != nil {
		pos := fs[0].D.Pos
		for _, f := range fs {
			if f.D.IsSet("table") {
				pos = f.D.Pos
				break
			}
		}
		b.e.Add(pos, "-table: %v", err)
	} else {
		m.Table, m.TableQuoted = l.Table.String(), l.Table.Quoted()
		if c, err := ledger.ParseCitus(st.Distributed); err == nil && c.Colocate.String() == l.Table.String() {
			b.e.Add(st.DistributedAt, "-distributed=%s names the ledger %s itself: name the business table, distributed by tenant, that the ledger is co-located with", st.Distributed, l.Table)
		}
	}
	return m
}

// methods checks every annotated method and adds the receivers, sorted by
// name, each with its methods sorted by name, to the model.
func (b *builder) methods(fs []directive.Found) {
	recvs := map[string]*ir.Receiver{}
	seen := map[*ast.FuncDecl]*directive.Directive{}
	dirOf := map[*ir.Method]*directive.Directive{}
	for _, f := range fs {
		if f.Decl == nil {
			continue
		}
		if prev := seen[f.Decl]; prev != nil {
			b.e.Add(f.D.Pos, "method %s already has an idemgen directive at %s: keep one", f.Decl.Name.Name, prev.Pos)
			continue
		}
		seen[f.Decl] = f.D
		meth := b.method(f.D, f.Decl)
		if meth == nil {
			continue
		}
		dirOf[meth] = f.D
		r := recvs[meth.Receiver]
		if r == nil {
			r = &ir.Receiver{Name: meth.Receiver}
			recvs[meth.Receiver] = r
		}
		r.Methods = append(r.Methods, meth)
	}
	m := b.model
	for _, r := range recvs {
		sort.Slice(r.Methods, func(i, j int) bool { return r.Methods[i].Name < r.Methods[j].Name })
		m.Receivers = append(m.Receivers, r)
		checkWrapperNames(r, dirOf, b.e)
		checkStoreKind(r, dirOf, b.e)
	}
	sort.Slice(m.Receivers, func(i, j int) bool { return m.Receivers[i].Name < m.Receivers[j].Name })
}

// checkWrapperNames refuses two annotated methods whose wrapper methods
// would share a name: the InTx variant of an atomic M is MInTx, which must
// not be annotated too.
func checkWrapperNames(r *ir.Receiver, dirOf map[*ir.Method]*directive.Directive, e *diag.Errs) {
	byName := map[string]*ir.Method{}
	for _, m := range r.Methods {
		byName[m.Name] = m
	}
	for _, m := range r.Methods {
		other := byName[names.InTx(m.Name)]
		if m.Mode != ir.ModeAtomic || other == nil {
			continue
		}
		e.Add(dirOf[m].Pos, "the wrapper %s gets a method %sInTx (%s run in the caller's transaction), which collides with the wrapper of the annotated method %s.%s at %s; rename one of the two methods", names.Wrapper(r.Name), m.Name, m.Name, r.Name, other.Name, dirOf[other].Pos)
	}
}

// checkStoreKind sets the transaction kind r's methods share, which
// decides the store its wrapper takes, and refuses a type whose methods
// take both kinds: its wrapper holds one store, built either from a
// *pgxpool.Pool or from a *sql.DB, and each runs one kind of transaction.
func checkStoreKind(r *ir.Receiver, dirOf map[*ir.Method]*directive.Directive, e *diag.Errs) {
	var first *ir.Method
	for _, m := range r.Methods {
		switch {
		case m.Tx == ir.TxNone:
		case first == nil:
			first, r.Tx = m, m.Tx
		case m.Tx != first.Tx:
			e.Add(dirOf[m].Pos, "%s takes a %s, but %s (at %s) takes a %s: the wrapper %s holds one store, built either from a *pgxpool.Pool (idem.NewStore, for pgx.Tx) "+
				"or from a *sql.DB (idem.NewSQLStore, for *sql.Tx), and a store runs one kind of transaction; take the same kind in every annotated method of %s, or move this one to a type of its own",
				m.Key, txSource(m.Tx), first.Key, dirOf[first].Pos, txSource(first.Tx), names.Wrapper(r.Name), r.Name)
		}
	}
}

func isTypeError(pe packages.Error) bool { return pe.Kind == packages.TypeError }

// reportBuildErrors says plainly that the package does not build, with the
// compiler's own messages.
func reportBuildErrors(e *diag.Errs, p *packages.Package, list []packages.Error) {
	for _, pe := range list {
		e.Add(posOf(pe.Pos), "package %s does not type-check, so idemgen cannot read its methods: %s; fix the build first (idemgen ignores the files it wrote itself)", p.PkgPath, pe.Msg)
	}
}

// posOf parses a go/packages position, "file:line:col" or "file:line".
func posOf(s string) token.Position {
	if s == "" || s == "-" {
		return token.Position{}
	}
	var pos token.Position
	rest := s
	nums := []*int{&pos.Column, &pos.Line}
	if strings.Count(s, ":") == 1 {
		nums = nums[1:]
	}
	for _, n := range nums {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return token.Position{Filename: s}
		}
		v, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			return token.Position{Filename: s}
		}
		*n, rest = v, rest[:i]
	}
	pos.Filename = rest
	return pos
}

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

// foreignTx is another library's transaction or database handle: how
// messages name the library, the transaction to take instead (tx), and how
// to get that one, in one line (how).
type foreignTx struct{ lib, tx, how string }

// How a method reaches the transaction idemgen runs it in.
const (
	howSQL  = "the wrapper begins it on the store's *sql.DB, built by idem.NewSQLStore"
	howBun  = "a bun.Tx embeds it: tx.Tx; bun's queries run on it with .Conn(tx)"
	howSqlx = "a *sqlx.Tx embeds it: tx.Tx"
	howPgx  = "the wrapper begins it on the store's *pgxpool.Pool, built by idem.NewStore"
)

// foreignTxs are transaction types and handles of database libraries, by
// qualified name, that an atomic or inline method cannot take.
var foreignTxs = map[string]foreignTx{
	"database/sql.Tx":                      {"database/sql", "*sql.Tx", "a pointer: database/sql hands out *sql.Tx"},
	"database/sql.DB":                      {"database/sql", "*sql.Tx", howSQL},
	"database/sql.Conn":                    {"database/sql", "*sql.Tx", howSQL},
	"gorm.io/gorm.DB":                      {"GORM", "*sql.Tx", "a GORM transaction holds it: tx.Statement.ConnPool.(*sql.Tx), with PrepareStmt off"},
	"github.com/uptrace/bun.Tx":            {"bun", "*sql.Tx", howBun},
	"github.com/uptrace/bun.IDB":           {"bun", "*sql.Tx", howBun},
	"github.com/jmoiron/sqlx.Tx":           {"sqlx", "*sql.Tx", howSqlx},
	"github.com/jmoiron/sqlx.DB":           {"sqlx", "*sql.Tx", howSqlx},
	"github.com/jackc/pgx/v5.Conn":         {"pgx", "pgx.Tx", howPgx},
	"github.com/jackc/pgx/v5/pgxpool.Pool": {"pgx", "pgx.Tx", howPgx},
}

// foreignTx reports, in one line, a parameter that is another library's
// transaction or handle: it is not a request to fingerprint, and idemgen's
// atomic and inline modes take a transaction they begin themselves, a
// pgx.Tx or a *sql.Tx; the line says how to take one.
func (b *builder) foreignTx(pos token.Position, m *ir.Method, param types.Type, n int) bool {
	t := param
	if p, isPtr := types.Unalias(t).(*types.Pointer); isPtr {
		t = p.Elem()
	}
	named, isNamedT := types.Unalias(t).(*types.Named)
	if !isNamedT || named.Obj().Pkg() == nil {
		return false
	}
	f, found := foreignTxs[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
	if !found {
		return false
	}
	b.e.Add(pos, "%s takes a %s handle (%s) as parameter %d, which is not a transaction idemgen can run the method in: take tx %s right after ctx instead (%s), or drop the parameter for external mode",
		m.Key, f.lib, types.TypeString(param, b.qualifier), n, f.tx, f.how)
	return true
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

// collectNamed puts the named types that get a fingerprint helper into the
// model, sorted by qualified name, and the package's identifiers that
// generated names must avoid.
func (b *builder) collectNamed() {
	for _, k := range load.SortedKeys(b.named) {
		b.model.Named = append(b.model.Named, b.named[k])
	}
	for _, n := range b.pkg.Scope().Names() {
		if names.MayCollide(n) {
			b.model.Declared = append(b.model.Declared, n)
		}
	}
}

// referObj records the file that declares obj, when it is in the package
// being generated: the generated files' build constraint includes that
// file's (combinedConstraint).
func (b *builder) referObj(obj types.Object) {
	if obj == nil || obj.Pkg() != b.pkg || !obj.Pos().IsValid() {
		return
	}
	if f := b.l.Pkg.Fset.Position(obj.Pos()).Filename; f != "" {
		b.referred[f] = true
	}
}

// refer records the files declaring the package's own types that t is
// built from.
func (b *builder) refer(t types.Type) {
	if t == nil || b.walked[t] {
		return
	}
	b.walked[t] = true
	switch u := t.(type) {
	case *types.Alias:
		b.referObj(u.Obj())
		b.refer(types.Unalias(u))
	case *types.Named:
		b.referObj(u.Obj())
		for i := 0; i < u.TypeArgs().Len(); i++ {
			b.refer(u.TypeArgs().At(i))
		}
		if u.Obj().Pkg() == b.pkg {
			b.refer(u.Underlying())
		}
	case *types.Pointer:
		b.refer(u.Elem())
	case *types.Slice:
		b.refer(u.Elem())
	case *types.Array:
		b.refer(u.Elem())
	case *types.Chan:
		b.refer(u.Elem())
	case *types.Map:
		b.refer(u.Key())
		b.refer(u.Elem())
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			b.refer(u.Field(i).Type())
		}
	case *types.Tuple:
		for i := 0; i < u.Len(); i++ {
			b.refer(u.At(i).Type())
		}
	case *types.Signature:
		b.refer(u.Params())
		b.refer(u.Results())
	case *types.Interface:
		for i := 0; i < u.NumEmbeddeds(); i++ {
			b.refer(u.EmbeddedType(i))
		}
		for i := 0; i < u.NumExplicitMethods(); i++ {
			b.refer(u.ExplicitMethod(i).Type())
		}
	}
}
