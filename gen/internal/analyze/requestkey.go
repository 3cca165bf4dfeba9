package analyze

import (
	"fmt"
	"go/types"
	"reflect"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/ir"
)

// requestKey resolves -key=PARAM.FIELD.PATH against the method's
// parameters (sig's from first on): the path must reach, through struct
// fields and pointers, a string or a [16]byte-based UUID that is
// fingerprinted. It records the key in m and reports problems at the
// directive.
func (b *builder) requestKey(d *directive.Directive, m *ir.Method, sig *types.Signature, first int) bool {
	if d.Key == "" {
		return true
	}
	fail := func(format string, args ...any) bool {
		b.e.Add(d.Pos, "-key=%s: "+format, append([]any{d.Key}, args...)...)
		return false
	}
	if d.Inline != "" {
		return fail("not with -inline: an inline method's key is written by its own INSERT; set it with idem.ContextWithKey")
	}
	parts := strings.Split(d.Key, ".")
	if len(parts) < 2 || slices.Contains(parts, "") {
		return fail("want a parameter and a field path, e.g. -key=evt.EventID")
	}
	var declared []string
	param := -1
	for i := first; i < sig.Params().Len(); i++ {
		declared = append(declared, sig.Params().At(i).Name())
		if sig.Params().At(i).Name() == parts[0] {
			param = i
		}
	}
	if param < 0 {
		return fail("%s takes no parameter %s (its request parameters: %s)", m.Key, parts[0], strings.Join(append(declared, "none")[:max(len(declared), 1)], ", "))
	}
	rk := &ir.RequestKey{Text: d.Key, Param: param - first, Path: parts[1:]}
	t := sig.Params().At(param).Type()
	for i, name := range rk.Path {
		if p, ok := types.Unalias(t).Underlying().(*types.Pointer); ok {
			rk.Nil = append(rk.Nil, i)
			t = p.Elem()
		}
		st, ok := types.Unalias(t).Underlying().(*types.Struct)
		if !ok {
			return fail("%s is a %s, not a struct with a field %s", strings.Join(parts[:i+1], "."), types.TypeString(t, b.qualifier), name)
		}
		field := -1
		for j := 0; j < st.NumFields(); j++ {
			if st.Field(j).Name() == name {
				field = j
			}
		}
		if field < 0 {
			return fail("%s has no field %s", strings.Join(parts[:i+1], "."), name)
		}
		f := st.Field(field)
		if !f.Exported() && f.Pkg() != b.pkg {
			return fail("%s.%s is unexported in package %s", strings.Join(parts[:i+1], "."), name, f.Pkg().Path())
		}
		if tag, _, _ := strings.Cut(reflect.StructTag(st.Tag(field)).Get("idem"), ","); tag == "-" {
			return fail("%s is tagged idem:\"-\": a key must stay in the fingerprint, since with a key in the context the field is request data like any other, and two requests differing in it must not replay each other; remove the tag", d.Key)
		}
		t = f.Type()
	}
	switch u := types.Unalias(t).Underlying().(type) {
	case *types.Basic:
		if u.Kind() != types.String {
			return fail("%s has type %s: a key is a string or a [16]byte-based UUID; format a number yourself with idem.ContextWithKey", d.Key, types.TypeString(t, b.qualifier))
		}
		if !types.Identical(t, types.Typ[types.String]) {
			rk.Conv = "string"
		}
	case *types.Array:
		if e, ok := u.Elem().Underlying().(*types.Basic); !ok || e.Kind() != types.Byte || u.Len() != 16 {
			return fail("%s has type %s: a key is a string or a [16]byte-based UUID", d.Key, types.TypeString(t, b.qualifier))
		}
		rk.Conv = "uuid"
	default:
		hint := ""
		if isNamed(t, "github.com/jackc/pgx/v5/pgtype", "UUID") {
			hint = fmt.Sprintf(" (a pgtype.UUID: name its Bytes, -key=%s.Bytes; a NULL one has zero Bytes and is refused as no key)", d.Key)
		}
		return fail("%s has type %s: a key is a string or a [16]byte-based UUID%s", d.Key, types.TypeString(t, b.qualifier), hint)
	}
	m.RequestKey = rk
	// The generated mismatch test must vary another field: with the same
	// key in the context, varying the key field would still be a
	// mismatch, but the scenario is about the rest of the request.
	m.Scalars = slices.DeleteFunc(m.Scalars, func(s ir.Scalar) bool {
		return s.Param == rk.Param && slices.Equal(s.Path, rk.Path)
	})
	return true
}
