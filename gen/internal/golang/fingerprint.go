package golang

import (
	"fmt"
	"path"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// fingerprintFunc:
//
//	func fingerprintPaymentsCharge(req ChargeRequest) []byte {
//		f := idem.NewFingerprinter("Payments.Charge"); f.Field("req"); fpChargeRequest(f, req); return f.Sum()
//	}
func (e *Emitter) fingerprintFunc(m *ir.Method) jen.Code {
	var params []jen.Code
	body := []jen.Code{jen.Id("f").Op(":=").Qual(ir.IdemPath, "NewFingerprinter").Call(jen.Lit(m.Key))}
	for _, p := range m.Params {
		params = append(params, jen.Id(p.Local).Add(e.Type(p.Type)))
		body = append(body, jen.Id("f").Dot("Field").Call(jen.Lit(p.Name)))
		if len(p.ProtoOmit) > 0 {
			// idemproto.Fingerprint(f, req, "request_id")
			args := []jen.Code{jen.Id("f"), jen.Id(p.Local)}
			for _, o := range p.ProtoOmit {
				args = append(args, jen.Lit(o))
			}
			body = append(body, jen.Qual(ir.IdemprotoPath, "Fingerprint").Call(args...))
			continue
		}
		body = append(body, e.fpValue(p.Type, jen.Id(p.Local), 0)...)
	}
	body = append(body, jen.Return(jen.Id("f").Dot("Sum").Call()))
	return Comment(
		fmt.Sprintf("%s returns the request fingerprint of %s: SHA-256 (idem.Fingerprinter) over", e.names.Fingerprint(m), m.Key),
		"the method name and each argument, field by field. The idempotency key and scope are not part of it.",
		fmt.Sprintf("What it hashes, and what it leaves out, is listed in %s's doc comment.", m.Name),
	).Line().Func().Id(e.names.Fingerprint(m)).Params(params...).Index().Byte().Block(body...).Line()
}

// fingerprintHelper:
//
//	func fpChargeRequest(f *idem.Fingerprinter, v ChargeRequest) { f.Field("Amount"); f.Int(int64(v.Amount)); ... }
func (e *Emitter) fingerprintHelper(n *ir.Named) jen.Code {
	params := jen.Params(jen.Id("f").Op("*").Qual(ir.IdemPath, "Fingerprinter"), jen.Id("v").Add(e.Type(n.Type)))
	if n.Text {
		// func fpNetipAddr(f *idem.Fingerprinter, v netip.Addr) { f.Text(v) }
		arg := jen.Id("v")
		if n.TextPtr {
			arg = jen.Op("&").Id("v")
		}
		return Comment(fmt.Sprintf("%s writes %s %s into a fingerprint by its text form (MarshalText): its fields are unexported in package %s.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), path.Base(n.Type.PkgPath))).Line().
			Func().Id(e.names.Helper(n.Type.NamedKey())).Add(params).Block(jen.Id("f").Dot("Text").Call(arg)).Line()
	}
	var hashed, left []string
	if n.Underlying.Kind == ir.KindStruct {
		for _, fl := range n.Underlying.Fields {
			if fl.Omitted {
				if fl.Name != "_" {
					left = append(left, fl.Name)
				}
			} else {
				hashed = append(hashed, fl.Name)
			}
		}
	}
	doc := fmt.Sprintf("%s writes %s %s into a fingerprint.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display())
	if n.Underlying.Kind == ir.KindStruct {
		doc = fmt.Sprintf("%s writes %s %s into a fingerprint, field by field: %s.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), orNone(hashed))
		if len(left) > 0 {
			doc += fmt.Sprintf(" Left out (idem:\"-\"): %s.", strings.Join(left, ", "))
		}
	}
	v := jen.Id("v")
	if n.Underlying.Kind == ir.KindNamed {
		// type Date time.Time: hashed as the type it converts to.
		doc = fmt.Sprintf("%s writes %s %s into a fingerprint, as the %s.%s it converts to.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), path.Base(n.Underlying.PkgPath), n.Underlying.Name)
		v = e.Type(n.Underlying).Call(v)
	}
	if n.Recursive {
		doc += fmt.Sprintf(" %s is recursive, so a value may be cyclic: f.Enter writes a back reference where the value reaches a pointer, slice or map it is already inside.", n.Type.Name)
	}
	e.cyclic = n.Recursive
	body := e.fpValue(n.Underlying, v, 0)
	e.cyclic = false
	return Comment(doc).Line().Func().Id(e.names.Helper(n.Type.NamedKey())).Add(params).Block(body...).Line()
}

// cycleGuard wraps the statements that write the contents of reference v (a
// pointer, slice or map whose element type t can lead back to a recursive
// type) in a cycle check:
//
//	if f.Enter(v.Next) { fpNode(f, *v.Next); f.Leave() }
func (e *Emitter) cycleGuard(t *ir.Type, v *jen.Statement, body []jen.Code) []jen.Code {
	if !e.cyclic || !e.reachesRecursive(t, map[*ir.Named]bool{}) {
		return body
	}
	return []jen.Code{jen.If(jen.Id("f").Dot("Enter").Call(v.Clone())).Block(append(body, jen.Id("f").Dot("Leave").Call())...)}
}

// reachesRecursive reports whether a value of type t can hold a value of a
// recursive named type.
func (e *Emitter) reachesRecursive(t *ir.Type, seen map[*ir.Named]bool) bool {
	if t == nil {
		return false
	}
	switch t.Kind {
	case ir.KindNamed:
		n := e.named[t.NamedKey()]
		if n == nil || seen[n] {
			return false
		}
		seen[n] = true
		return n.Recursive || e.reachesRecursive(n.Underlying, seen)
	case ir.KindStruct:
		for _, fl := range t.Fields {
			if !fl.Omitted && e.reachesRecursive(fl.Type, seen) {
				return true
			}
		}
		return false
	}
	return e.reachesRecursive(t.Elem, seen)
}

// fpValue writes the statements that hash value v of type t.
func (e *Emitter) fpValue(t *ir.Type, v *jen.Statement, depth int) []jen.Code {
	f := func(method string, args ...jen.Code) jen.Code { return jen.Id("f").Dot(method).Call(args...) }
	switch t.Kind {
	case ir.KindBasic:
		return e.fpBasic(t.Basic, v, false)
	case ir.KindNamed:
		if t.PkgPath == "time" && t.Name == "Time" {
			return []jen.Code{f("Time", v)}
		}
		if n := e.named[t.NamedKey()]; n != nil {
			return []jen.Code{jen.Id(e.names.Helper(n.Type.NamedKey())).Call(jen.Id("f"), v)}
		}
		return e.fpBasic(t.Basic, v, true)
	case ir.KindPointer:
		if t.Proto {
			// idemproto.Fingerprint(f, v.Order): fields by number, nil included.
			return []jen.Code{jen.Qual(ir.IdemprotoPath, "Fingerprint").Call(jen.Id("f"), v)}
		}
		return []jen.Code{jen.If(v.Clone().Op("==").Nil()).Block(f("Nil")).Else().Block(
			append([]jen.Code{f("Ptr")}, e.cycleGuard(t.Elem, v, e.fpValue(t.Elem, deref(t.Elem, v), depth))...)...)}
	case ir.KindSlice, ir.KindArray:
		if t.Kind == ir.KindSlice && t.Elem.Kind == ir.KindBasic && (t.Elem.Basic == "byte" || t.Elem.Basic == "uint8") {
			return []jen.Code{f("Bytes", v)}
		}
		el := jen.Id(names.LoopElem(depth))
		var cond *jen.Statement
		if t.Kind == ir.KindSlice {
			cond = e.nilCond(v) // before the elements, which may hold slices
		}
		loop := []jen.Code{jen.For(jen.List(jen.Id("_"), el.Clone()).Op(":=").Range().Add(v.Clone())).Block(e.fpValue(t.Elem, el, depth+1)...)}
		if t.Kind == ir.KindArray {
			return append([]jen.Code{f("Len", jen.Len(v.Clone()))}, loop...)
		}
		return []jen.Code{jen.If(cond).Block(f("Nil")).Else().Block(append([]jen.Code{f("Len", jen.Len(v.Clone()))}, e.cycleGuard(t.Elem, v, loop)...)...)}
	case ir.KindMap:
		k := jen.Id(names.LoopKey(depth))
		cond := e.nilCond(v)
		body := append(e.fpValue(t.Key, k.Clone(), depth+1), e.fpValue(t.Elem, v.Clone().Index(k.Clone()), depth+1)...)
		loop := []jen.Code{jen.For(jen.List(jen.Id("_"), k.Clone()).Op(":=").Range().Qual("slices", "Sorted").Call(jen.Qual("maps", "Keys").Call(v.Clone()))).Block(body...)}
		return []jen.Code{jen.If(cond).Block(f("Nil")).Else().Block(
			append([]jen.Code{f("Len", jen.Len(v.Clone()))}, e.cycleGuard(t.Elem, v, loop)...)...,
		)}
	case ir.KindStruct:
		var out []jen.Code
		for _, fl := range t.Fields {
			if fl.Omitted {
				continue
			}
			out = append(out, f("Field", jen.Lit(fl.Name)))
			// idem:",emptyisnil": an empty value is written as nil.
			bytes := fl.Type.Kind == ir.KindSlice && fl.Type.Elem.Kind == ir.KindBasic && (fl.Type.Elem.Basic == "byte" || fl.Type.Elem.Basic == "uint8")
			collection := fl.Type.Kind == ir.KindMap || fl.Type.Kind == ir.KindSlice && !bytes
			e.emptyIsNil = fl.EmptyIsNil && collection
			val := e.fpValue(fl.Type, v.Clone().Dot(fl.Name), depth)
			if fl.EmptyIsNil && !collection {
				val = []jen.Code{jen.If(jen.Len(v.Clone().Dot(fl.Name)).Op("==").Lit(0)).Block(f("Nil")).Else().Block(val...)}
			}
			out = append(out, val...)
		}
		return out
	}
	return []jen.Code{jen.Comment("unsupported type " + t.Expr)}
}

// nilCond is the test under which a slice or map v is written as nil:
// v == nil, or len(v) == 0 for a field tagged idem:",emptyisnil" (set in
// e.emptyIsNil by the struct field being written, and used up here).
func (e *Emitter) nilCond(v *jen.Statement) *jen.Statement {
	if e.emptyIsNil {
		e.emptyIsNil = false
		return jen.Len(v.Clone()).Op("==").Lit(0)
	}
	return v.Clone().Op("==").Nil()
}

func (e *Emitter) fpBasic(basic string, v *jen.Statement, named bool) []jen.Code {
	call := func(method, conv string) []jen.Code {
		arg := v.Clone()
		if named || basic != conv {
			arg = jen.Id(conv).Call(v.Clone())
		}
		return []jen.Code{jen.Id("f").Dot(method).Call(arg)}
	}
	switch basic {
	case "bool":
		return call("Bool", "bool")
	case "string":
		return call("String", "string")
	case "int", "int8", "int16", "int32", "int64", "rune":
		return call("Int", "int64")
	case "uint", "uint8", "uint16", "uint32", "uint64", "uintptr", "byte":
		return call("Uint", "uint64")
	case "float32", "float64":
		return call("Float", "float64")
	case "complex64", "complex128":
		return []jen.Code{
			jen.Id("f").Dot("Float").Call(jen.Float64().Call(jen.Real(v.Clone()))),
			jen.Id("f").Dot("Float").Call(jen.Float64().Call(jen.Imag(v.Clone()))),
		}
	}
	return []jen.Code{jen.Comment("unsupported basic type " + basic)}
}

// deref dereferences a pointer expression, with parentheses only where a
// selector or index follows.
func deref(elem *ir.Type, v *jen.Statement) *jen.Statement {
	if elem.Kind == ir.KindMap || elem.Kind == ir.KindStruct {
		return jen.Parens(jen.Op("*").Add(v.Clone()))
	}
	return jen.Op("*").Add(v.Clone())
}
