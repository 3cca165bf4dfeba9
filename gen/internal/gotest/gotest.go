// Package gotest prints a package model (ir) as the generated tests,
// idem_gen_test.go: one idemtest.Package value and one short suite literal
// per method, whose scenarios live in runtime/idemtest. It renders through
// package golang's helpers, takes every name from package names, and
// imports neither go/types nor x/tools.
package gotest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/golang"
	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// emitter renders the generated tests of one package model.
type emitter struct {
	*golang.Emitter
	m     *ir.Package
	names *names.Table
}

// File renders the generated tests of m. migrations are the generated
// migration files by name (relative to the migrations directory), which the
// tests require unchanged.
func File(m *ir.Package, migrations map[string][]byte) ([]byte, error) {
	g := golang.New(m)
	e := &emitter{Emitter: g, m: m, names: g.Names()}
	return e.emitTests(migrations)
}

// emitTests renders the generated tests file: one idemtest.Package value,
// then one short suite literal per method. The scenarios live in
// runtime/idemtest, so the file reads in one screen and a fixed scenario
// reaches users with the runtime. migrations are the generated migration
// files by name (relative to the migrations directory), which the tests
// require unchanged.
func (e *emitter) emitTests(migrations map[string][]byte) ([]byte, error) {
	f := golang.NewFile(e.m)
	f.Add(e.testPackage(migrations))
	f.Add(e.fixtures())
	for _, r := range e.m.Receivers {
		for _, m := range r.Methods {
			f.Add(e.methodTest(r, m))
		}
	}
	return golang.Render(f)
}

// fixtures: every fixture the tests call, each under its declaration, so
// that a missing one fails the build here first, next to what to write.
//
//	var (
//		// func newPaymentsForTest(t *testing.T, db *idemtest.DB) *Payments
//		_ = newPaymentsForTest
//		...
//	)
func (e *emitter) fixtures() jen.Code {
	var items []jen.Code
	add := func(decl, name string) {
		items = append(items, jen.Comment(strings.Join(strings.Fields(decl), " ")), jen.Id("_").Op("=").Id(name))
	}
	for _, r := range e.m.Receivers {
		add(names.ServiceDecl(r.Name), names.ServiceFixture(r.Name))
		for _, m := range r.Methods {
			if len(m.Params) > 0 {
				add(names.SampleDecl(m.Receiver, m.Name, m.Params), names.SampleFixture(m.Receiver, m.Name))
			}
			if m.HasOtherFixture {
				add(names.OtherDecl(m.Receiver, m.Name, m.Params), names.OtherFixture(m.Receiver, m.Name))
			}
			if m.HasEffectFixture {
				add(names.EffectDecl(m.Receiver, m.Name), names.EffectFixture(m.Receiver, m.Name))
			}
		}
	}
	return golang.Comment("The fixtures the tests call, written once in a _test.go file of this package. A missing one",
		"fails the build here: declare it as the comment above its line says.").Line().
		Var().Defs(items...).Line()
}

// testPackage:
//
//	var idemgenPackage = idemtest.Package{
//		Table: "idempotency_keys",
//		Migrations: idemtest.Migrations{Dir: "migrations", Format: "goose", Generated: []idemtest.GeneratedFile{...}},
//	}
func (e *emitter) testPackage(migrations map[string][]byte) jen.Code {
	var files []jen.Code
	for _, name := range slices.Sorted(mapsKeys(migrations)) {
		sum := sha256.Sum256(migrations[name])
		files = append(files, jen.Line().Values(jen.Id("Name").Op(":").Lit(name), jen.Id("SHA256").Op(":").Lit(hex.EncodeToString(sum[:]))))
	}
	doc := []string{names.TestPackageVar + " is what the generated tests share: the ledger table and the package's migrations,"}
	migs := jen.Null()
	if e.m.MigrationsDir != "" {
		doc = append(doc, fmt.Sprintf("applied (%s, in %s/) to every test's database; the files idemgen wrote must be there, unchanged.",
			e.m.MigrationFormat, e.m.MigrationsDir))
		migs = jen.Id("Migrations").Op(":").Qual(ir.IdemtestPath, "Migrations").Values(
			jen.Id("Dir").Op(":").Lit(e.m.MigrationsDir), jen.Id("Format").Op(":").Lit(e.m.MigrationFormat),
			jen.Id("Generated").Op(":").Index().Qual(ir.IdemtestPath, "GeneratedFile").Values(append(files, jen.Line())...),
		).Op(",")
	} else {
		doc = append(doc, "none here (-migrations=off): the tests create the ledger table, and the fixture the rest of the schema.")
	}
	return golang.Comment(doc...).Line().
		Var().Id(names.TestPackageVar).Op("=").Qual(ir.IdemtestPath, "Package").Block(
		jen.Id("Table").Op(":").Lit(e.m.Table).Op(","),
		migs,
	).Line()
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// methodTest:
//
//	// TestIdempotentPaymentsCharge runs idemtest.Atomic's scenarios against Payments.Charge.
//	func TestIdempotentPaymentsCharge(t *testing.T) {
//		idemtest.Atomic[*Payments, *IdempotentPayments, ChargeRequest, Receipt]{
//			Package: idemgenPackage,
//			...
//		}.Run(t)
//	}
func (e *emitter) methodTest(r *ir.Receiver, m *ir.Method) jen.Code {
	s := e.suite(r, m)
	name := names.Test(r.Name, m.Name)
	var body []jen.Code
	if s.argsType != nil {
		body = append(body, jen.Comment(names.ArgsType+" are the arguments of "+m.Key+" after ctx"+map[bool]string{true: " and tx", false: ""}[m.Mode != ir.ModeExternal]+"."),
			jen.Type().Id(names.ArgsType).Add(s.argsType))
	}
	lit := jen.Qual(ir.IdemtestPath, s.kind).Types(jen.Op("*").Id(r.Name), jen.Op("*").Id(names.Wrapper(r.Name)), s.a.Clone(), e.Result(m))
	body = append(body, lit.Block(s.fields...).Dot("Run").Call(jen.Id("t")))
	return golang.Comment(e.testDoc(name, s.kind, m)...).Line().
		Func().Id(name).Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(body...).Line()
}

// testDoc is a method test's doc comment: which suite it runs, and what
// the package's fixtures leave out.
func (e *emitter) testDoc(name, kind string, m *ir.Method) []string {
	doc := []string{fmt.Sprintf("%s runs the scenarios of idemtest.%s against %s on a real PostgreSQL.", name, kind, m.Key)}
	if m.Mode != ir.ModeInline && !m.HasEffectFixture {
		doc = append(doc, fmt.Sprintf("It counts executions, not effects: add %s to count those too.", names.EffectDecl(m.Receiver, m.Name)))
	}
	if m.NoMismatch() {
		doc = append(doc, "No mismatch scenario: "+NoMismatch(e.m, m))
	}
	return doc
}

// suiteLit is what a method's suite literal is made of.
type suiteLit struct {
	kind     string         // Atomic, External or Inline
	a        *jen.Statement // the request type: the single argument's, or args
	argsType jen.Code       // the args struct, when the method has not exactly one argument
	fields   []jen.Code
}

// suite builds the fields of m's suite literal.
func (e *emitter) suite(r *ir.Receiver, m *ir.Method) suiteLit {
	s := suiteLit{kind: map[ir.Mode]string{ir.ModeAtomic: "Atomic", ir.ModeExternal: "External", ir.ModeInline: "Inline"}[m.Mode]}
	if m.Tx == ir.TxSQL {
		s.kind += "SQL"
	}
	ad := e.adapt(r, m)
	s.a, s.argsType = ad.a, ad.argsType
	field := func(name string, v jen.Code) { s.fields = append(s.fields, jen.Id(name).Op(":").Add(v).Op(",")) }
	field("Package", jen.Id(names.TestPackageVar))
	if r.Tx == ir.TxSQL {
		field("Store", sqlStore())
	}
	field("Method", jen.Id(e.names.MethodVar(m)))
	field("Fingerprint", ad.fingerprint)
	field("New", jen.Id(names.ServiceFixture(r.Name)))
	field("Wrap", jen.Id(names.Constructor(r.Name)))
	field("Call", ad.call(m.Name, true, false))
	if m.Mode != ir.ModeExternal {
		field("CallInTx", ad.call(names.InTx(m.Name), true, true))
	}
	if m.Mode == ir.ModeInline {
		field("Sweep", jen.Parens(jen.Op("*").Id(names.Wrapper(r.Name))).Dot(names.Sweep(m.Name)))
	}
	field("Body", ad.call(m.Name, false, m.Mode != ir.ModeExternal))
	if m.Mode == ir.ModeInline {
		field("Lookup", jen.Parens(jen.Op("*").Id(r.Name)).Dot(m.Inline.Lookup))
	}
	field("Sample", ad.sample)
	if other := e.other(m, ad); other != nil {
		field("Other", other)
	}
	if m.HasEffectFixture {
		field("Effects", jen.Id(names.EffectFixture(m.Receiver, m.Name)))
	}
	if m.Result != nil && m.Result.Proto {
		field("Equal", jen.Qual(ir.IdemprotoPath, "Equal").Types(e.Type(m.Result)))
	}
	if m.RequestKey != nil {
		field("KeyFromRequest", jen.True())
	}
	if m.Storm != 0 && m.Storm != 32 {
		field("Storm", jen.Lit(m.Storm))
	}
	return s
}

// sqlStore builds the store of a type whose methods take a *sql.Tx:
//
//	func(db *idemtest.DB, opts ...idem.Option) (*idem.Store, error) { return idem.NewSQLStore(db.SQL, opts...) }
func sqlStore() jen.Code {
	return jen.Func().Params(jen.Id("db").Op("*").Qual(ir.IdemtestPath, "DB"), jen.Id("opts").Op("...").Qual(ir.IdemPath, "Option")).
		Params(jen.Op("*").Qual(ir.IdemPath, "Store"), jen.Error()).Block(
		jen.Return(jen.Qual(ir.IdemPath, "NewSQLStore").Call(jen.Id("db").Dot("SQL"), jen.Id("opts").Op("..."))))
}

// adapter renders how the suite calls a method, its fingerprint and its
// sample: method expressions when the method takes one argument, closures
// over an args struct otherwise.
type adapter struct {
	e           *emitter
	r           *ir.Receiver
	m           *ir.Method
	a           *jen.Statement
	argsType    jen.Code
	fingerprint jen.Code
	sample      jen.Code
	fields      []string // args struct fields, one per parameter
}

func (e *emitter) adapt(r *ir.Receiver, m *ir.Method) *adapter {
	ad := &adapter{e: e, r: r, m: m}
	if len(m.Params) == 1 {
		ad.a = e.Type(m.Params[0].Type)
		ad.fingerprint = jen.Id(e.names.Fingerprint(m))
		ad.sample = jen.Id(names.SampleFixture(m.Receiver, m.Name))
		return ad
	}
	var fields []jen.Code
	var refs []jen.Code
	for i, p := range m.Params {
		name := names.ArgsField(p.Local, i)
		ad.fields = append(ad.fields, name)
		fields = append(fields, jen.Id(name).Add(e.Type(p.Type)))
		refs = append(refs, jen.Id("a").Dot(name))
	}
	ad.a = jen.Id(names.ArgsType)
	ad.argsType = jen.Struct(fields...)
	ad.fingerprint = jen.Func().Params(jen.Id("a").Id(names.ArgsType)).Index().Byte().Block(
		jen.Return(jen.Id(e.names.Fingerprint(m)).Call(refs...)))
	if len(m.Params) == 0 {
		ad.sample = jen.Func().Params(jen.Op("*").Qual("testing", "T")).Params(jen.Id("a").Id(names.ArgsType)).Block(jen.Return())
	} else {
		ad.sample = jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Params(jen.Id("a").Id(names.ArgsType)).Block(
			jen.List(refs...).Op("=").Id(names.SampleFixture(m.Receiver, m.Name)).Call(jen.Id("t")),
			jen.Return(),
		)
	}
	return ad
}

// call renders the wrapper's (wrapper) or the service's method name as the
// suite calls it: a method expression, adapted by idemtest.NoResult(Tx) for
// a method that returns only an error, or a closure over args.
func (ad *adapter) call(name string, wrapper, tx bool) jen.Code {
	recv := ad.r.Name
	if wrapper {
		recv = names.Wrapper(ad.r.Name)
	}
	if ad.argsType == nil {
		expr := jen.Parens(jen.Op("*").Id(recv)).Dot(name)
		if ad.m.Result != nil {
			return expr
		}
		if tx {
			return jen.Qual(ir.IdemtestPath, "NoResultTx").Call(expr)
		}
		return jen.Qual(ir.IdemtestPath, "NoResult").Call(expr)
	}
	params := []jen.Code{jen.Id("x").Op("*").Id(recv), jen.Id("ctx").Qual("context", "Context")}
	args := []jen.Code{jen.Id("ctx")}
	if tx {
		params = append(params, jen.Id("tx").Add(golang.TxType(ad.m)))
		args = append(args, jen.Id("tx"))
	}
	for _, f := range ad.fields {
		args = append(args, jen.Id("a").Dot(f))
	}
	params = append(params, jen.Id("a").Id(names.ArgsType))
	inner := jen.Id("x").Dot(name).Call(args...)
	var ret jen.Code = jen.Return(inner)
	if ad.m.Result == nil {
		ret = jen.Return(jen.Struct().Values(), inner)
	}
	return jen.Func().Params(params...).Params(ad.e.Result(ad.m), jen.Error()).Block(ret)
}

// other renders the suite's Other: the package's other…Args fixture, or a
// closure that varies one fingerprinted scalar of the sample
// (idemtest.Vary keeps a uuid a uuid, a number a number); nil when
// neither exists.
func (e *emitter) other(m *ir.Method, ad *adapter) jen.Code {
	if m.HasOtherFixture {
		if ad.argsType == nil {
			return jen.Id(names.OtherFixture(m.Receiver, m.Name))
		}
		return jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Params(jen.Id("a").Id(names.ArgsType)).Block(
			jen.List(ad.refs()...).Op("=").Id(names.OtherFixture(m.Receiver, m.Name)).Call(jen.Id("t")),
			jen.Return(),
		)
	}
	mu := vary(m.Scalars)
	if mu == nil {
		return nil
	}
	target := jen.Id("a")
	if ad.argsType != nil {
		target = target.Dot(ad.fields[mu.Param])
	}
	for _, p := range mu.Path {
		target = target.Dot(p)
	}
	vary := target.Clone().Op("=").Qual(ir.IdemtestPath, "Vary").Call(target.Clone())
	if ad.argsType == nil {
		return jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Add(ad.a.Clone()).Block(
			jen.Id("a").Op(":=").Id(names.SampleFixture(m.Receiver, m.Name)).Call(jen.Id("t")),
			vary,
			jen.Return(jen.Id("a")),
		)
	}
	return jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Params(jen.Id("a").Id(names.ArgsType)).Block(
		jen.List(ad.refs()...).Op("=").Id(names.SampleFixture(m.Receiver, m.Name)).Call(jen.Id("t")),
		vary,
		jen.Return(),
	)
}

// vary picks the scalar a generated test changes to make another request:
// the first of the kind most likely to stay valid (varyRank); nil when
// there is none.
func vary(scalars []ir.Scalar) *ir.Scalar {
	var best *ir.Scalar
	for i := range scalars {
		if best == nil || varyRank(scalars[i].Kind) > varyRank(best.Kind) {
			best = &scalars[i]
		}
	}
	return best
}

// varyRank orders the scalars a generated test may vary, most likely to
// stay valid first: a number rarely has a format; a string may be a uuid or
// an email (idemtest.Vary keeps its shape, but a table may still check
// it); a bool may select another code path.
func varyRank(kind string) int {
	switch kind {
	case "int", "uint":
		return 4
	case "float", "complex":
		return 3
	case "string":
		return 2
	case "bool":
		return 1
	}
	return 0
}

func (ad *adapter) refs() []jen.Code {
	var out []jen.Code
	for _, f := range ad.fields {
		out = append(out, jen.Id("a").Dot(f))
	}
	return out
}

// NoMismatch says why the generated tests of m (of package p) have no
// mismatch scenario (m.NoMismatch) and, when p has tests, how to add one.
func NoMismatch(p *ir.Package, m *ir.Method) string {
	s := fmt.Sprintf("%s: no mismatch test: the generated tests vary one fingerprinted number, string or bool reached through the arguments' struct fields to make another request, and there is none (fingerprinted: %s)", m.Key, strings.Join(m.Fingerprinted, ", "))
	if len(m.Fingerprinted) == 0 {
		s = fmt.Sprintf("%s: no mismatch test: nothing in the arguments is fingerprinted (every field is tagged idem:\"-\"), so every call is the same request", m.Key)
	}
	if p.Tests {
		s += "; to test it, add to a _test.go file\n\t" + names.OtherDecl(m.Receiver, m.Name, m.Params) + "\nwhich " + names.OtherWhat(m.Key)
	}
	return s
}
