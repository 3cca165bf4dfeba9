package effectwalk

import (
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// fieldOf is the struct field a function value is loaded from: s.send in
// s.send(ctx, msg).
func fieldOf(v ssa.Value) *types.Var {
	switch x := v.(type) {
	case *ssa.UnOp:
		if fa, ok := x.X.(*ssa.FieldAddr); ok {
			return structField(fa.X.Type(), fa.Field)
		}
	case *ssa.Field:
		return structField(x.X.Type(), x.Field)
	}
	return nil
}

func structField(t types.Type, i int) *types.Var {
	if p, ok := types.Unalias(t).Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if s, ok := t.Underlying().(*types.Struct); ok && i < s.NumFields() {
		return s.Field(i)
	}
	return nil
}

// storedFuncs indexes the functions code stores into struct fields of
// function type, in the functions given (and the closures they declare).
func storedFuncs(fns []*ssa.Function, into map[*types.Var][]*ssa.Function) {
	var scan func(f *ssa.Function)
	scan = func(f *ssa.Function) {
		for _, b := range f.Blocks {
			for _, instr := range b.Instrs {
				st, ok := instr.(*ssa.Store)
				if !ok {
					continue
				}
				fa, ok := st.Addr.(*ssa.FieldAddr)
				if !ok {
					continue
				}
				g := funcOf(st.Val)
				field := structField(fa.X.Type(), fa.Field)
				if g == nil || field == nil {
					continue
				}
				into[field] = append(into[field], g)
			}
		}
		for _, anon := range f.AnonFuncs {
			scan(anon)
		}
	}
	for _, f := range fns {
		scan(f)
	}
}
