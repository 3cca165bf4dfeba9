package gen

import (
	"fmt"
	"go/token"
	"go/types"
	"strings"
)

// fixtureWant is a function the generated tests call and the user writes.
type fixtureWant struct {
	pos   token.Position // the directive that needs it
	name  string
	want  string // the declaration to add, as source
	wantQ string // its type, fully qualified, to compare with
	what  string // what it must do
}

// wantFixtures records the fixtures method m needs.
func (b *builder) wantFixtures(pos token.Position, m *Method, sig *types.Signature, first int) {
	q := types.RelativeTo(b.pkg)
	recv := "new" + m.Receiver + "ForTest"
	if !b.fixtureSeen[recv] {
		b.fixtureSeen[recv] = true
		b.fixtures = append(b.fixtures, fixtureWant{
			pos: pos, name: recv,
			want:  fmt.Sprintf("func %s(t *testing.T, db *idemtest.DB) *%s", recv, m.Receiver),
			wantQ: fmt.Sprintf("func(*testing.T, *%s.DB) *%s.%s", idemtestPath, b.pkg.Path(), m.Receiver),
			what:  "builds the service under test on the test's database (db.Pool); create the tables it needs there",
		})
	}
	if len(m.Params) == 0 {
		return // nothing to sample
	}
	var src, qual []string
	for i, p := range m.Params {
		t := sig.Params().At(first + i).Type()
		src = append(src, p.Name+" "+types.TypeString(t, q))
		qual = append(qual, types.TypeString(t, nil))
	}
	name := "sample" + m.Receiver + m.Name + "Args"
	f := fixtureWant{pos: pos, name: name,
		want:  fmt.Sprintf("func %s(t *testing.T) (%s)", name, strings.Join(src, ", ")),
		wantQ: "func(*testing.T)",
		what:  fmt.Sprintf("returns a valid request for %s, one it accepts and completes without error", m.Key),
	}
	switch len(qual) {
	case 1:
		f.wantQ += " " + qual[0]
	default:
		f.wantQ += " (" + strings.Join(qual, ", ") + ")"
	}
	b.fixtures = append(b.fixtures, f)
}

// sameSignature compares a function type with a wanted one, ignoring
// parameter and result names.
func sameSignature(t types.Type, wantQ string) bool {
	sig, ok := t.(*types.Signature)
	if !ok {
		return false
	}
	strip := func(tup *types.Tuple) *types.Tuple {
		var vs []*types.Var
		for i := 0; i < tup.Len(); i++ {
			vs = append(vs, types.NewParam(token.NoPos, nil, "", tup.At(i).Type()))
		}
		return types.NewTuple(vs...)
	}
	got := types.TypeString(types.NewSignatureType(nil, nil, nil, strip(sig.Params()), strip(sig.Results()), sig.Variadic()), nil)
	return got == wantQ
}

// checkFixtures checks that the functions the generated tests call exist in
// the package's tests with the right signatures. Each problem is reported at
// the directive that needs the fixture, with the exact function to add.
func (b *builder) checkFixtures() {
	var scope *types.Scope
	if b.l.test != nil && b.l.test.Types != nil {
		scope = b.l.test.Types.Scope()
	}
	for _, f := range b.fixtures {
		var obj types.Object
		if scope != nil {
			obj = scope.Lookup(f.name)
		}
		fn, _ := obj.(*types.Func)
		if fn != nil && sameSignature(fn.Type(), f.wantQ) {
			continue
		}
		if obj == nil {
			b.e.add(f.pos, "the generated tests need a fixture: add to a _test.go file of package %s\n\t%s\nwhich %s (or set -tests=false)", b.pkg.Name(), f.want, f.what)
			continue
		}
		b.e.add(f.pos, "fixture %s has the wrong signature %s; the generated tests need\n\t%s\nwhich %s (or set -tests=false)", f.name, types.TypeString(obj.Type(), types.RelativeTo(b.pkg)), f.want, f.what)
	}
}
