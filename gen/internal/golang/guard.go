package golang

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/ir"
)

// guards adds every compile-time guard: each method's signature, then each
// fingerprinted struct's fields.
func (e *Emitter) guards(f *jen.File, helpers []*ir.Named) {
	for _, r := range e.m.Receivers {
		for _, m := range r.Methods {
			if m.Mode == ir.ModeInline {
				f.Add(e.inlineGuard(m))
				continue
			}
			f.Add(e.guard(m))
		}
	}
	for _, n := range helpers {
		if g := e.structGuard(n); g != nil {
			f.Add(g)
		}
	}
}

// guard: the type's name is in the compiler's error when the method changes
// ("cannot use (*Payments).Charge (...) as runGoGeneratePaymentsCharge value").
//
//	type runGoGeneratePaymentsCharge func(*Payments, context.Context, pgx.Tx, ChargeRequest) (Receipt, error)
//	var _ runGoGeneratePaymentsCharge = (*Payments).Charge
func (e *Emitter) guard(m *ir.Method) jen.Code {
	params := []jen.Code{jen.Op("*").Id(m.Receiver), jen.Qual("context", "Context")}
	if m.Mode == ir.ModeAtomic {
		params = append(params, TxType(m))
	}
	for _, p := range m.Params {
		params = append(params, e.Type(p.Type))
	}
	results := []jen.Code{jen.Error()}
	if m.Result != nil {
		results = []jen.Code{e.Type(m.Result), jen.Error()}
	}
	return Comment(fmt.Sprintf("%s is the signature of %s this file was generated from. The build fails", e.names.Guard(m), m.Key),
		"below, naming this type, if the method changes: run go generate.").Line().
		Type().Id(e.names.Guard(m)).Func().Params(params...).Params(results...).Line().Line().
		Var().Id("_").Id(e.names.Guard(m)).Op("=").Parens(jen.Op("*").Id(m.Receiver)).Dot(m.Name).Line()
}

// structGuard makes the build fail when a fingerprinted struct gains, loses
// or changes a field after generation, with an error that names the guard's
// type ("cannot convert ChargeRequest{} (...) to type runGoGenerateChargeRequestFields"):
//
//	type runGoGenerateChargeRequestFields struct{ Amount int64; Currency string }
//	var _ = runGoGenerateChargeRequestFields(ChargeRequest{})
func (e *Emitter) structGuard(n *ir.Named) jen.Code {
	if n.Text || n.Underlying.Kind != ir.KindStruct {
		return nil
	}
	for _, fl := range n.Underlying.Fields {
		if fl.Type.Kind == ir.KindOther && strings.Contains(fl.Type.Expr, ".") {
			return nil
		}
	}
	return Comment(fmt.Sprintf("%s holds the fields of %s that %s was generated for. The build", e.names.FieldsGuard(n.Type.NamedKey()), n.Type.Display(), e.names.Helper(n.Type.NamedKey())),
		"fails below, naming this type, if they change: run go generate so that "+e.names.Helper(n.Type.NamedKey())+" hashes them.").Line().
		Type().Id(e.names.FieldsGuard(n.Type.NamedKey())).Add(e.Type(n.Underlying)).Line().Line().
		Var().Id("_").Op("=").Id(e.names.FieldsGuard(n.Type.NamedKey())).Parens(e.Type(n.Type).Values()).Line()
}
