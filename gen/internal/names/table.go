package names

import (
	"fmt"

	"github.com/idemgen/idemgen/gen/ir"
)

// Table holds the unexported identifiers of one package's generated code,
// allocated once, in a fixed order, so that every emitter (and the
// analysis) sees the same ones. Each is unique: it collides neither with the
// package's own declarations (ir.Package.Declared), nor with an argument's
// local name, nor with another generated identifier.
type Table struct {
	taken       map[string]bool
	methodVar   map[*ir.Method]string
	guard       map[*ir.Method]string
	lookupGuard map[*ir.Method]string
	fingerprint map[*ir.Method]string
	helper      map[string]string // by ir.Type.NamedKey
	fieldsGuard map[string]string // by ir.Type.NamedKey
}

// For allocates the names of p's generated identifiers: per receiver and
// method in the model's order, then per named type in ir.Package.Named's
// order.
func For(p *ir.Package) *Table {
	t := &Table{taken: map[string]bool{}, methodVar: map[*ir.Method]string{}, guard: map[*ir.Method]string{},
		lookupGuard: map[*ir.Method]string{}, fingerprint: map[*ir.Method]string{},
		helper: map[string]string{}, fieldsGuard: map[string]string{}}
	for _, d := range p.Declared {
		t.taken[d] = true
	}
	for _, r := range p.Receivers {
		for _, m := range r.Methods {
			for _, a := range m.Params {
				t.taken[a.Local] = true
			}
		}
	}
	for _, r := range p.Receivers {
		for _, m := range r.Methods {
			t.methodVar[m] = t.unique(methodVar(r.Name, m.Name))
			t.guard[m] = t.unique(guardType(r.Name, m.Name))
			if m.Inline != nil {
				t.lookupGuard[m] = t.unique(guardType(r.Name, m.Inline.Lookup))
			}
			t.fingerprint[m] = t.unique(fingerprintFunc(r.Name, m.Name))
		}
	}
	for _, n := range p.Named {
		k := n.Type.NamedKey()
		t.helper[k] = t.unique(helper(n.Type.PkgPath == p.Path, n.PkgName, n.Type.Name))
		t.fieldsGuard[k] = t.unique(fieldsGuard(n.Type.Name))
	}
	return t
}

// unique returns name, or name2, name3, ... when name is taken.
func (t *Table) unique(name string) string {
	s := name
	for i := 2; t.taken[s]; i++ {
		s = fmt.Sprintf("%s%d", name, i)
	}
	t.taken[s] = true
	return s
}

// MethodVar is m's description for the runtime: idemPaymentsCharge.
func (t *Table) MethodVar(m *ir.Method) string { return t.methodVar[m] }

// Guard is the type of m's signature guard, named so that the compiler's
// error says what to do: runGoGeneratePaymentsCharge.
func (t *Table) Guard(m *ir.Method) string { return t.guard[m] }

// LookupGuard is the type of an inline method's lookup's signature guard:
// runGoGenerateShopOrderByKey.
func (t *Table) LookupGuard(m *ir.Method) string { return t.lookupGuard[m] }

// Fingerprint is m's fingerprint function: fingerprintPaymentsCharge.
func (t *Table) Fingerprint(m *ir.Method) string { return t.fingerprint[m] }

// Helper is the fingerprint helper of the named type key (ir.Type.NamedKey):
// fpChargeRequest; "" when the type has none.
func (t *Table) Helper(key string) string { return t.helper[key] }

// FieldsGuard is the type of a struct's field guard:
// runGoGenerateChargeRequestFields.
func (t *Table) FieldsGuard(key string) string { return t.fieldsGuard[key] }
