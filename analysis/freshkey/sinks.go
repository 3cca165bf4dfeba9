package freshkey

import (
	"go/constant"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// sink is a place a key is set: where, the key, and the value that carries
// it to the call (a context, a request, a header).
type sink struct {
	instr   ssa.Instruction
	what    string
	key     ssa.Value
	carrier ssa.Value
}

// sinks returns the keys instr sets.
func sinks(instr ssa.Instruction) []sink {
	switch in := instr.(type) {
	case *ssa.Call:
		return callSinks(in)
	case *ssa.MapUpdate:
		switch {
		case isNamed(in.Map.Type(), "net/http", "Header") && isKeyName(in.Key, headerName):
			return []sink{{instr: in, what: "an Idempotency-Key header", key: in.Value, carrier: headerOwner(in.Map)}}
		case isNamed(in.Map.Type(), metadataPath, "MD") && isKeyName(in.Key, headerName):
			return []sink{{instr: in, what: "the idempotency-key gRPC metadata", key: in.Value, carrier: in.Map}}
		}
	case *ssa.Store:
		if fa, ok := in.Addr.(*ssa.FieldAddr); ok && fieldName(fa) == "RequestId" && isString(in.Val.Type()) {
			return []sink{{instr: in, what: "an AIP-155 request_id", key: in.Val, carrier: fa.X}}
		}
	}
	return nil
}

func callSinks(c *ssa.Call) []sink {
	fn := c.Call.StaticCallee()
	if fn == nil {
		return nil
	}
	args := c.Call.Args
	pkg, name := funcID(fn)
	switch {
	case pkg == idemPath && name == "ContextWithKey" && len(args) == 2:
		return []sink{{instr: c, what: "idem.ContextWithKey", key: args[1], carrier: c}}
	case pkg == "net/http" && (name == "Header.Set" || name == "Header.Add") && len(args) == 3 && isKeyName(args[1], headerName):
		return []sink{{instr: c, what: "an Idempotency-Key header", key: args[2], carrier: headerOwner(args[0])}}
	case pkg == metadataPath && (name == "AppendToOutgoingContext" || name == "Pairs") && len(args) >= 1:
		var out []sink
		kv := variadic(args[len(args)-1])
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] != nil && kv[i+1] != nil && isKeyName(kv[i], headerName) {
				out = append(out, sink{instr: c, what: "the idempotency-key gRPC metadata", key: kv[i+1], carrier: c})
			}
		}
		return out
	case pkg == metadataPath && (name == "MD.Set" || name == "MD.Append") && len(args) == 3 && isKeyName(args[1], headerName):
		var out []sink
		for _, v := range variadic(args[2]) {
			if v != nil {
				out = append(out, sink{instr: c, what: "the idempotency-key gRPC metadata", key: v, carrier: args[0]})
			}
		}
		return out
	}
	return nil
}

// funcID returns fn's package path and name, Type.Method for a method.
func funcID(fn *ssa.Function) (string, string) {
	obj, _ := fn.Object().(*types.Func)
	if fn.Origin() != nil {
		obj, _ = fn.Origin().Object().(*types.Func)
	}
	if obj == nil || obj.Pkg() == nil {
		return "", ""
	}
	name := obj.Name()
	if recv := obj.Type().(*types.Signature).Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	}
	return obj.Pkg().Path(), name
}

// variadic returns the elements of a ...T argument built by the compiler
// (a slice of a local array stored index by index), nil where one is not a
// constant index.
func variadic(v ssa.Value) []ssa.Value {
	sl, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	arr, ok := sl.X.(*ssa.Alloc)
	if !ok {
		return nil
	}
	p, ok := arr.Type().Underlying().(*types.Pointer)
	if !ok {
		return nil
	}
	at, ok := p.Elem().Underlying().(*types.Array)
	if !ok {
		return nil
	}
	out := make([]ssa.Value, at.Len())
	for _, r := range *arr.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		c, ok := ia.Index.(*ssa.Const)
		if !ok || c.Value == nil {
			continue
		}
		i, _ := constant.Int64Val(c.Value)
		if i < 0 || int(i) >= len(out) {
			continue
		}
		for _, rr := range *ia.Referrers() {
			if st, ok := rr.(*ssa.Store); ok && st.Addr == ia {
				out[i] = st.Val
			}
		}
	}
	return out
}

// isKeyName reports whether v is a string constant naming the key header
// (or metadata key), in any case.
func isKeyName(v ssa.Value, name string) bool {
	c, ok := v.(*ssa.Const)
	return ok && c.Value != nil && c.Value.Kind() == constant.String && strings.EqualFold(constant.StringVal(c.Value), name)
}

// isNamed reports whether t is the named type pkg.name.
func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

func fieldName(fa *ssa.FieldAddr) string {
	p, ok := fa.X.Type().Underlying().(*types.Pointer)
	if !ok {
		return "" // a type parameter's core type: not followed
	}
	st, ok := p.Elem().Underlying().(*types.Struct)
	if !ok || fa.Field >= st.NumFields() {
		return ""
	}
	return st.Field(fa.Field).Name()
}

// headerOwner returns what carries header h to the call: the request whose
// Header field it is (req.Header), whose Header method returned it
// (Connect's req.Header()), or h itself.
func headerOwner(h ssa.Value) ssa.Value {
	switch v := h.(type) {
	case *ssa.UnOp:
		if fa, ok := v.X.(*ssa.FieldAddr); ok && v.Op == token.MUL {
			return fa.X
		}
	case *ssa.Call:
		if fn := v.Call.StaticCallee(); fn != nil && fn.Name() == "Header" && len(v.Call.Args) == 1 {
			return v.Call.Args[0]
		}
	}
	return h
}
