package names

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/gen/ir"
)

// TestTable: generated names avoid the package's declarations, the
// arguments' local names and each other, in the model's order.
func TestTable(t *testing.T) {
	do := &ir.Method{Receiver: "Svc", Name: "Do", Params: []ir.Param{{Name: "req", Local: "idemSvcDo"}}}
	add := &ir.Method{Receiver: "Svc", Name: "Add", Inline: &ir.Inline{Lookup: "Do"}}
	money := &ir.Named{Type: &ir.Type{Kind: ir.KindNamed, PkgPath: "example.com/m/svc", Name: "Money"}, PkgName: "svc"}
	id := &ir.Named{Type: &ir.Type{Kind: ir.KindNamed, PkgPath: "github.com/google/uuid", Name: "UUID"}, PkgName: "uuid"}
	p := &ir.Package{Path: "example.com/m/svc", Declared: []string{"fingerprintSvcDo", "fpMoney", "fpMoney2"},
		Receivers: []*ir.Receiver{{Name: "Svc", Methods: []*ir.Method{add, do}}}, Named: []*ir.Named{id, money}}
	tb := For(p)
	assert.Equal(t, "idemSvcDo2", tb.MethodVar(do), "an argument's local name is taken")
	assert.Equal(t, "fingerprintSvcDo2", tb.Fingerprint(do), "a declaration is taken")
	assert.Equal(t, "runGoGenerateSvcDo", tb.LookupGuard(add), "allocated first, for Add's lookup Do")
	assert.Equal(t, "runGoGenerateSvcDo2", tb.Guard(do))
	assert.Equal(t, "fpUuidUUID", tb.Helper(id.Type.NamedKey()))
	assert.Equal(t, "fpMoney3", tb.Helper(money.Type.NamedKey()))
	assert.Equal(t, "runGoGenerateMoneyFields", tb.FieldsGuard(money.Type.NamedKey()))
	assert.Equal(t, tb.Fingerprint(do), For(p).Fingerprint(do), "every emitter gets the same table")
}

func TestLocals(t *testing.T) {
	for _, s := range []string{"ctx", "tx", "e0", "k12", "idem", "f"} {
		assert.True(t, Reserved(s), s)
	}
	for _, s := range []string{"each", "k", "e1x", "req"} {
		assert.False(t, Reserved(s), s)
	}
	free := func(s string) bool { return s != "arg2" }
	assert.Equal(t, "req", Local("req", 1, free))
	assert.Equal(t, "arg1", Local("ctx", 1, free))
	assert.Equal(t, "arg2_2", Local("e0", 2, free))
	assert.Equal(t, "arg1", ArgsField("t", 0))
	assert.Equal(t, "req", ArgsField("req", 0))
}

func TestFixtures(t *testing.T) {
	params := []ir.Param{{Name: "req", Source: "struct{A int \"json:\\\"a\\\"\"}"}, {Name: "n", Source: "int"}}
	assert.Equal(t, "func sampleSvcDoArgs(t *testing.T) (req struct {\n\t\tA int `json:\"a\"`\n\t}, n int)", SampleDecl("Svc", "Do", params))
	assert.Equal(t, "func countSvcDoEffects(t *testing.T, db *idemtest.DB) int", EffectDecl("Svc", "Do"))
	assert.Equal(t, "func newSvcForTest(t *testing.T, db *idemtest.DB) *Svc", ServiceDecl("Svc"))
	assert.True(t, MayCollide("fpX") && MayCollide("idemFoo") && !MayCollide("Svc"))
}
