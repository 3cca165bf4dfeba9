// Package analyze turns a loaded package into its model (package ir): it
// checks every directive and annotated method (signature and mode, the
// fingerprint plan, the JSON round trip of the response, the fixtures the
// generated tests call, inline mode, ledger names) and returns facts with
// positions. It writes no generated code and no doc prose, and names
// generated identifiers only through package names.
package analyze

import (
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
