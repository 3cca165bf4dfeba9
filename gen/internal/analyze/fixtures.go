package analyze

import (
	"fmt"
	"go/token"
	"go/types"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// fixtureWant is a function the generated tests call and the user writes.
type fixtureWant struct {
	pos   token.Position // the directive that needs it
	name  string
	want  string // the declaration to add, as Go source a user can paste
	what  string // what it must do
	recv  string // the receiver type's name
	meth  string // sample fixtures: the method whose arguments it returns
	first int    // sample fixtures: the index of the first sampled parameter
	// effects is set for an optional effect-count fixture of this method:
	// absent is fine, present must have the wanted signature.
	effects *ir.Method
	// other is set for the optional fixture returning a second request of
	// this method for the mismatch test (the sample's signature).
	other *ir.Method
}

// wantFixtures records the fixtures method m needs.
func (b *builder) wantFixtures(pos token.Position, m *ir.Method, first int) {
	recv := names.ServiceFixture(m.Receiver)
	if !b.fixtureSeen[recv] {
		b.fixtureSeen[recv] = true
		handle := "db.Pool"
		if m.Tx == ir.TxSQL {
			handle = "db.SQL, a *sql.DB"
		}
		b.fixtures = append(b.fixtures, fixtureWant{
			pos: pos, name: recv, recv: m.Receiver, want: names.ServiceDecl(m.Receiver),
			what: "builds the service under test on the test's database (" + handle + "), which already holds the package's migrations, your own tables' included; seed rows there if the service needs them",
		})
	}
	b.wantEffectFixture(pos, m)
	if len(m.Params) == 0 {
		return // nothing to sample
	}
	b.fixtures = append(b.fixtures, fixtureWant{pos: pos, name: names.SampleFixture(m.Receiver, m.Name), recv: m.Receiver, meth: m.Name, first: first,
		want: names.SampleDecl(m.Receiver, m.Name, m.Params),
		what: fmt.Sprintf("returns a valid request for %s, one it accepts and completes without error", m.Key),
	})
	b.fixtures = append(b.fixtures, fixtureWant{pos: pos, name: names.OtherFixture(m.Receiver, m.Name), recv: m.Receiver, meth: m.Name, first: first, other: m,
		want: names.OtherDecl(m.Receiver, m.Name, m.Params), what: names.OtherWhat(m.Key),
	})
}

// checkFixtures checks that the functions the generated tests call exist in
// the package's tests with the right signatures. Types are compared for
// identity (types.Identical) in the test package, where the fixtures and
// the methods are type-checked together, so an alias or []uint8 for []byte
// is as good as the name the method uses. Each problem is reported at the
// directive that needs the fixture, with the exact function to add.
func (b *builder) checkFixtures() {
	var tp *types.Package
	if b.l.Test != nil && b.l.Test.Types != nil {
		tp = b.l.Test.Types
	}
	for _, f := range b.fixtures {
		var obj types.Object
		if tp != nil {
			obj = tp.Scope().Lookup(f.name)
		}
		if f.effects != nil {
			b.checkEffectFixture(tp, f, obj)
			continue
		}
		if f.other != nil && obj == nil {
			continue // optional: the tests derive another request from the sample
		}
		if fn, ok := obj.(*types.Func); ok && f.other != nil && fixtureFits(tp, f, fn.Type().(*types.Signature)) {
			f.other.HasOtherFixture = true
			continue
		}
		if fn, ok := obj.(*types.Func); ok && fixtureFits(tp, f, fn.Type().(*types.Signature)) {
			continue
		}
		if obj == nil {
			b.e.Add(f.pos, "the generated tests need a fixture: add to a _test.go file of package %s\n\t%s\nwhich %s (or set -tests=false)", b.pkg.Name(), f.want, f.what)
			continue
		}
		if f.other != nil {
			b.e.Add(f.pos, "optional fixture %s has the wrong signature %s; the generated tests call it as\n\t%s\nwhich %s (or rename it)", f.name, types.TypeString(obj.Type(), b.qualifierIn(tp)), f.want, f.what)
			continue
		}
		b.e.Add(f.pos, "fixture %s has the wrong signature %s; the generated tests need\n\t%s\nwhich %s (or set -tests=false)", f.name, types.TypeString(obj.Type(), b.qualifierIn(tp)), f.want, f.what)
	}
}

// qualifierIn is b.qualifier for the test variant tp of the package.
func (b *builder) qualifierIn(tp *types.Package) types.Qualifier {
	return func(p *types.Package) string {
		if p == tp || p == b.pkg {
			return ""
		}
		return p.Name()
	}
}

// fixtureFits reports whether sig, declared in the test package tp, is the
// signature fixture f needs.
func fixtureFits(tp *types.Package, f fixtureWant, sig *types.Signature) bool {
	recvObj, _ := tp.Scope().Lookup(f.recv).(*types.TypeName)
	if recvObj == nil || sig.Variadic() || sig.Params().Len() == 0 || !isPointerTo(sig.Params().At(0).Type(), "testing", "T") {
		return false
	}
	params, results := sig.Params(), sig.Results()
	if f.meth == "" { // func(t *testing.T, db *idemtest.DB) *Recv
		if params.Len() != 2 || results.Len() != 1 || !isPointerTo(params.At(1).Type(), ir.IdemtestPath, "DB") {
			return false
		}
		p, ok := types.Unalias(results.At(0).Type()).(*types.Pointer)
		return ok && types.Identical(p.Elem(), recvObj.Type())
	}
	// func(t *testing.T) (the method's arguments after ctx and tx)
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(recvObj.Type()), true, tp, f.meth)
	meth, ok := obj.(*types.Func)
	if !ok || params.Len() != 1 {
		return false
	}
	want := meth.Type().(*types.Signature).Params()
	if results.Len() != want.Len()-f.first {
		return false
	}
	for i := 0; i < results.Len(); i++ {
		if !types.Identical(results.At(i).Type(), want.At(f.first+i).Type()) {
			return false
		}
	}
	return true
}

func isPointerTo(t types.Type, pkg, name string) bool {
	p, ok := types.Unalias(t).(*types.Pointer)
	return ok && isNamed(p.Elem(), pkg, name)
}

// wantEffectFixture records the optional fixture that counts m's effects
// (count<Receiver><Method>Effects). When the package's tests declare it, every
// twin, storm and failing-body test asserts how much it grew. Inline tests
// count the business table's keyed rows in any case; the fixture adds what
// the method does beyond that row (a balance, a second table).
func (b *builder) wantEffectFixture(pos token.Position, m *ir.Method) {
	b.fixtures = append(b.fixtures, fixtureWant{
		pos: pos, name: names.EffectFixture(m.Receiver, m.Name), effects: m,
		want: names.EffectDecl(m.Receiver, m.Name),
		what: fmt.Sprintf("counts the effects of %s on db (e.g. its rows), so the tests can assert each request had one", m.Key),
	})
}

// checkEffectFixture accepts an absent effect fixture, uses a present one
// with the right signature and reports one with another signature.
func (b *builder) checkEffectFixture(tp *types.Package, f fixtureWant, obj types.Object) {
	if obj == nil {
		return
	}
	if fn, ok := obj.(*types.Func); ok {
		sig := fn.Type().(*types.Signature)
		p, r := sig.Params(), sig.Results()
		if !sig.Variadic() && p.Len() == 2 && r.Len() == 1 && isPointerTo(p.At(0).Type(), "testing", "T") &&
			isPointerTo(p.At(1).Type(), ir.IdemtestPath, "DB") && types.Identical(r.At(0).Type(), types.Typ[types.Int]) {
			f.effects.HasEffectFixture = true
			return
		}
	}
	b.e.Add(f.pos, "optional fixture %s has the wrong signature %s; the generated tests call it as\n\t%s\nwhich %s (or rename it)",
		f.name, types.TypeString(obj.Type(), b.qualifierIn(tp)), f.want, f.what)
}
