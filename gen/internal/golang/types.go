package golang

import (
	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/ir"
)

// Type is the one ir.Type → jen.Code helper.
func (e *Emitter) Type(t *ir.Type) *jen.Statement {
	switch t.Kind {
	case ir.KindBasic:
		return jen.Id(t.Basic)
	case ir.KindNamed:
		var s *jen.Statement
		if t.PkgPath == e.m.Path {
			s = jen.Id(t.Name)
		} else {
			s = jen.Qual(t.PkgPath, t.Name)
		}
		if len(t.TypeArgs) > 0 {
			var args []jen.Code
			for _, a := range t.TypeArgs {
				args = append(args, e.Type(a))
			}
			s = s.Types(args...)
		}
		return s
	case ir.KindPointer:
		return jen.Op("*").Add(e.Type(t.Elem))
	case ir.KindSlice:
		return jen.Index().Add(e.Type(t.Elem))
	case ir.KindArray:
		return jen.Index(jen.Lit(int(t.Len))).Add(e.Type(t.Elem))
	case ir.KindMap:
		return jen.Map(e.Type(t.Key)).Add(e.Type(t.Elem))
	case ir.KindStruct:
		return e.structType(t)
	case ir.KindFunc:
		return e.funcType(t)
	case ir.KindChan:
		switch t.ChanDir {
		case "chan<-":
			return jen.Chan().Op("<-").Add(e.Type(t.Elem))
		case "<-chan":
			return jen.Op("<-").Chan().Add(e.Type(t.Elem))
		}
		return jen.Chan().Add(e.Type(t.Elem))
	case ir.KindInterface:
		var items []jen.Code
		for _, fl := range t.Fields {
			if fl.Embedded {
				items = append(items, e.Type(fl.Type))
				continue
			}
			items = append(items, jen.Id(fl.Name).Add((*e.Type(fl.Type))[1:]...))
		}
		return jen.Interface(items...)
	}
	return jen.Id(t.Expr)
}

// structType: struct{ Amount int64 `json:"amount"`; Money; *pkg.Alias }
func (e *Emitter) structType(t *ir.Type) *jen.Statement {
	var fields []jen.Code
	for _, fl := range t.Fields {
		var s *jen.Statement
		switch {
		case fl.Alias != nil:
			s = e.Type(fl.Alias)
			if fl.Type.Kind == ir.KindPointer {
				s = jen.Op("*").Add(s)
			}
		case fl.Embedded:
			s = e.Type(fl.Type)
		default:
			s = jen.Id(fl.Name).Add(e.Type(fl.Type))
		}
		if fl.Tag != "" {
			s = s.Op("`" + fl.Tag + "`")
		}
		fields = append(fields, s)
	}
	return jen.Struct(fields...)
}

// funcType: func(int, ...string) (R, error)
func (e *Emitter) funcType(t *ir.Type) *jen.Statement {
	var params, results []jen.Code
	for i, p := range t.Params {
		if t.Variadic && i == len(t.Params)-1 {
			params = append(params, jen.Op("...").Add(e.Type(p.Elem)))
			continue
		}
		params = append(params, e.Type(p))
	}
	for _, r := range t.Results {
		results = append(results, e.Type(r))
	}
	s := jen.Func().Params(params...)
	switch len(results) {
	case 0:
		return s
	case 1:
		return s.Add(results[0])
	}
	return s.Params(results...)
}

// TxType is the type of the transaction m takes: pgx.Tx or *sql.Tx.
func TxType(m *ir.Method) *jen.Statement {
	if m.Tx == ir.TxSQL {
		return jen.Op("*").Qual(ir.SQLPath, "Tx")
	}
	return jen.Qual(ir.PgxPath, "Tx")
}

// Result is the response type as the runtime sees it: R, or struct{} for
// error-only methods.
func (e *Emitter) Result(m *ir.Method) *jen.Statement {
	if m.Result == nil {
		return jen.Struct()
	}
	return e.Type(m.Result)
}
