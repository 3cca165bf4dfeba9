package analyze

import (
	"fmt"
	"go/token"
	"go/types"
	"reflect"
	"strings"

	"github.com/idemgen/idemgen/gen/ir"
)

// render converts a type to the model's representation, as generated code
// must spell it. It never fails: anything the emitter does not take apart is
// kept as source text.
func (b *builder) render(t types.Type) *ir.Type {
	switch t := types.Unalias(t).(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			return &ir.Type{Kind: ir.KindNamed, PkgPath: "unsafe", Name: "Pointer"}
		}
		return &ir.Type{Kind: ir.KindBasic, Basic: t.Name()}
	case *types.Named:
		out := &ir.Type{Kind: ir.KindNamed, Name: t.Obj().Name()}
		if t.Obj().Pkg() != nil {
			out.PkgPath = t.Obj().Pkg().Path()
		}
		if out.PkgPath == "" { // error
			return &ir.Type{Kind: ir.KindOther, Expr: t.Obj().Name()}
		}
		if bt, ok := t.Underlying().(*types.Basic); ok {
			out.Basic = bt.Name()
		}
		for i := 0; i < t.TypeArgs().Len(); i++ {
			out.TypeArgs = append(out.TypeArgs, b.render(t.TypeArgs().At(i)))
		}
		return out
	case *types.Pointer:
		return &ir.Type{Kind: ir.KindPointer, Elem: b.render(t.Elem()), Proto: protoMessage(t.Elem())}
	case *types.Slice:
		return &ir.Type{Kind: ir.KindSlice, Elem: b.render(t.Elem())}
	case *types.Array:
		return &ir.Type{Kind: ir.KindArray, Len: t.Len(), Elem: b.render(t.Elem())}
	case *types.Map:
		return &ir.Type{Kind: ir.KindMap, Key: b.render(t.Key()), Elem: b.render(t.Elem())}
	case *types.Struct:
		out := &ir.Type{Kind: ir.KindStruct}
		for i := 0; i < t.NumFields(); i++ {
			f := t.Field(i)
			tag := t.Tag(i)
			fl := ir.Field{Name: f.Name(), Type: b.render(f.Type()), Embedded: f.Embedded(),
				Tag: tag, Omitted: omitted(tag) || f.Name() == "_", EmptyIsNil: parseIdemTag(tag).emptyIsNil}
			et := f.Type()
			if p, ok := et.(*types.Pointer); ok {
				et = p.Elem()
			}
			if a, ok := et.(*types.Alias); ok && f.Embedded() && a.Obj().Pkg() != nil {
				fl.Alias = &ir.Type{Kind: ir.KindNamed, Name: a.Obj().Name(), PkgPath: a.Obj().Pkg().Path()}
			}
			out.Fields = append(out.Fields, fl)
		}
		return out
	case *types.Signature:
		out := &ir.Type{Kind: ir.KindFunc, Variadic: t.Variadic()}
		for i := 0; i < t.Params().Len(); i++ {
			out.Params = append(out.Params, b.render(t.Params().At(i).Type()))
		}
		for i := 0; i < t.Results().Len(); i++ {
			out.Results = append(out.Results, b.render(t.Results().At(i).Type()))
		}
		return out
	case *types.Chan:
		dir := map[types.ChanDir]string{types.SendRecv: "chan", types.SendOnly: "chan<-", types.RecvOnly: "<-chan"}[t.Dir()]
		return &ir.Type{Kind: ir.KindChan, ChanDir: dir, Elem: b.render(t.Elem())}
	case *types.Interface:
		out := &ir.Type{Kind: ir.KindInterface}
		for i := 0; i < t.NumEmbeddeds(); i++ {
			out.Fields = append(out.Fields, ir.Field{Type: b.render(t.EmbeddedType(i)), Embedded: true})
		}
		for i := 0; i < t.NumExplicitMethods(); i++ {
			m := t.ExplicitMethod(i)
			out.Fields = append(out.Fields, ir.Field{Name: m.Name(), Type: b.render(m.Type())})
		}
		return out
	}
	return &ir.Type{Kind: ir.KindOther, Expr: types.TypeString(t, func(p *types.Package) string {
		if p == b.pkg {
			return ""
		}
		return p.Name()
	})}
}

// omitted reports a field tagged idem:"-".
func omitted(tag string) bool { return parseIdemTag(tag).omit }

// idemTag is a field's idem struct tag: idem:"-" leaves the field out of
// the fingerprint; idem:",emptyisnil" makes an empty slice or map
// fingerprint as nil.
type idemTag struct {
	omit, emptyIsNil bool
	problem          string // why the tag is invalid, "" when it is valid
}

func parseIdemTag(tag string) idemTag {
	v, ok := reflect.StructTag(tag).Lookup("idem")
	if !ok || v == "-" {
		return idemTag{omit: ok}
	}
	name, opts, _ := strings.Cut(v, ",")
	var t idemTag
	if name != "" {
		t.problem = fmt.Sprintf("idem:%q: the part before the comma must be empty (fields are hashed by their Go name); write idem:\"-\" to leave the field out or idem:\",emptyisnil\"", v)
		return t
	}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "emptyisnil":
			t.emptyIsNil = true
		default:
			t.problem = fmt.Sprintf("idem:%q: unknown option %q (known: emptyisnil)", v, o)
			return t
		}
	}
	return t
}

// qualifier spells types as the user's source does: the package's own
// unqualified, others by package name.
func (b *builder) qualifier(p *types.Package) string {
	if p == b.pkg {
		return ""
	}
	return p.Name()
}

func qualified(t types.Type) string { return types.TypeString(t, nil) }

// fpWalk checks that a request parameter can be fingerprinted and records,
// for doc comments, which fields are hashed and which are left out.
type fpWalk struct {
	b     *builder
	pos   token.Position
	m     *ir.Method
	param int
	open  []string // the named types being walked, outermost first

	// What the doc comments must say about this request's encoding.
	alike       bool     // the slice or map about to be walked is tagged emptyisnil
	nilDistinct bool     // some slice or map tells nil from empty
	hasTime     bool     // some time.Time is hashed
	emptyAlike  []string // paths tagged emptyisnil
	text        []string // types hashed by their text form
	proto       []string // protobuf message types hashed through protoreflect
	requestIDs  []string // AIP-155 request_id fields left out
}

// check walks t reached at path. stack holds the named types being walked,
// so recursive types stop at their second occurrence.
func (w *fpWalk) check(t types.Type, path string, fieldPath []string, stack map[string]bool) bool {
	fail := func(why string) bool { return w.fail(t, path, why) }
	switch u := types.Unalias(t).(type) {
	case *types.Named:
		return w.named(t, u, path, fieldPath, stack)
	case *types.Basic:
		return w.basic(t, u, path, fieldPath)
	case *types.Pointer:
		if protoMessage(u.Elem()) {
			// A protobuf message: idemproto.Fingerprint hashes its
			// fields by number through protoreflect.
			w.proto = appendUnique(w.proto, types.TypeString(u, w.b.qualifier))
			w.leaf(path, nil, "")
			if fieldPath != nil && len(fieldPath) == 0 {
				w.protoScalars(u.Elem())
			}
			return true
		}
		// A parameter that points to a struct: a generated test may change
		// a field through it (req.Amount++ works on a non-nil pointer).
		var through []string
		if fieldPath != nil && len(fieldPath) == 0 {
			if _, isStruct := u.Elem().Underlying().(*types.Struct); isStruct {
				through = fieldPath
			}
		}
		return w.check(u.Elem(), path, through, stack)
	case *types.Slice:
		w.sawNilable()
		if b, ok := types.Unalias(u.Elem()).(*types.Basic); ok && b.Kind() == types.Byte {
			w.leaf(path, nil, "")
			return true
		}
		return w.check(u.Elem(), path+"[]", nil, stack)
	case *types.Array:
		return w.check(u.Elem(), path+"[]", nil, stack)
	case *types.Map:
		w.sawNilable()
		kb, ok := u.Key().Underlying().(*types.Basic)
		if !ok || kb.Info()&types.IsOrdered == 0 || kb.Info()&types.IsString == 0 && kb.Info()&types.IsNumeric == 0 {
			return fail("its keys cannot be sorted (use string or number keys), so its entries have no canonical order")
		}
		if kb.Info()&types.IsFloat != 0 {
			return fail("its keys are floats, and NaN keys are neither equal to each other nor ordered, so the map has no canonical order; use string or integer keys")
		}
		ok = w.check(u.Key(), path+" keys", nil, stack)
		return w.check(u.Elem(), path+"[key]", nil, stack) && ok
	case *types.Struct:
		if hidden, pkg := w.hiddenFields(u); len(hidden) > 0 {
			return fail(fmt.Sprintf("its fields %s are unexported in package %s, so generated code cannot read them", strings.Join(hidden, ", "), pkg))
		}
		return w.fields(u, path, fieldPath, stack)
	case *types.Interface:
		return fail("an interface's dynamic value is not known at generate time")
	case *types.Chan:
		return fail("a channel is not a value")
	case *types.Signature:
		return fail("a function is not a value")
	case *types.TypeParam:
		return fail("type parameters are not supported")
	}
	return fail("this kind of type is not supported")
}

// fail refuses t, reached at path, for why.
func (w *fpWalk) fail(t types.Type, path, why string) bool {
	way := "tag the field idem:\"-\" to leave it out of the fingerprint, or use a plain value"
	if !strings.Contains(path, ".") {
		// The parameter itself (or its elements): there is no field to tag.
		way = "give the parameter a type idemgen can hash: a plain value, or a struct whose unhashable fields are tagged idem:\"-\""
	}
	w.b.e.Add(w.pos, "cannot fingerprint %s (%s): %s; %s", path, types.TypeString(t, w.b.qualifier), why, way)
	return false
}

// named walks a named type: time.Time and types over it are hashed as
// instants, other packages' opaque types by their text form, recursive
// types stop at their second occurrence, and every other named type gets a
// fingerprint helper (ir.Named) whose underlying type is walked.
// t is the type as reached (an alias names it in messages).
func (w *fpWalk) named(t types.Type, u *types.Named, path string, fieldPath []string, stack map[string]bool) bool {
	rel := func(t types.Type) string { return types.TypeString(t, w.b.qualifier) }
	fail := func(why string) bool { return w.fail(t, path, why) }
	obj := u.Obj()
	if obj.Pkg() == nil {
		return fail("an interface's dynamic value is not known at generate time")
	}
	if protoMessage(u) {
		w.b.e.Add(w.pos, "cannot fingerprint %s (%s): it is a protobuf message taken by value; %s", path, rel(t), w.b.byPointer(u))
		return false
	}
	if p, isPtr := u.Underlying().(*types.Pointer); isPtr && protoMessage(p.Elem()) {
		w.b.e.Add(w.pos, "cannot fingerprint %s (%s): it is a defined pointer type, which has none of the message's methods; use %s itself", path, rel(t), rel(p))
		return false
	}
	if obj.Pkg().Path() == "time" && obj.Name() == "Time" {
		w.hasTime = true
		w.leaf(path, fieldPath, "")
		return true
	}
	if obj.Parent() != obj.Pkg().Scope() {
		return fail("a type declared inside a function cannot be named by generated code")
	}
	if obj.Pkg() != w.b.pkg && !obj.Exported() {
		return fail("it is unexported in another package")
	}
	key := qualified(u)
	if _, basic := u.Underlying().(*types.Basic); basic {
		return w.check(u.Underlying(), path, fieldPath, stack)
	}
	if tt := timeType(u); tt != nil {
		// type Date time.Time: hashed as the time.Time it converts to.
		w.hasTime = true
		w.leaf(path, fieldPath, "")
		if w.b.named[key] == nil {
			w.b.named[key] = &ir.Named{Type: w.b.render(u), Underlying: w.b.render(tt), PkgName: obj.Pkg().Name()}
		}
		return true
	}
	if st, ok := u.Underlying().(*types.Struct); ok && obj.Pkg() != w.b.pkg {
		if hidden, _ := w.hiddenFields(st); len(hidden) > 0 {
			if ptr, ok := textMarshaler(u); ok {
				// Another package's type whose fields generated code
				// cannot read, hashed by its text form.
				w.leaf(path, nil, "")
				w.text = appendUnique(w.text, rel(u))
				if w.b.named[key] == nil {
					w.b.named[key] = &ir.Named{Type: w.b.render(u), PkgName: obj.Pkg().Name(), Text: true, TextPtr: ptr}
				}
				return true
			}
		}
	}
	if stack[key] {
		// Every named type on the way back to key is part of the
		// cycle; their helpers check values for cycles (Named.Recursive).
		for i := len(w.open) - 1; i >= 0; i-- {
			w.b.named[w.open[i]].Recursive = true
			if w.open[i] == key {
				break
			}
		}
		w.m.Fingerprinted = append(w.m.Fingerprinted, path+" (recursive)")
		return true
	}
	if st, ok := u.Underlying().(*types.Struct); ok {
		if hidden, pkg := w.hiddenFields(st); len(hidden) > 0 {
			return fail(fmt.Sprintf("its fields %s are unexported in package %s, so generated code cannot read them", strings.Join(hidden, ", "), pkg))
		}
	}
	if w.b.named[key] == nil {
		w.b.named[key] = &ir.Named{Type: w.b.render(u), Underlying: w.b.render(u.Underlying()), PkgName: obj.Pkg().Name()}
	}
	stack[key] = true
	w.open = append(w.open, key)
	defer func() {
		delete(stack, key)
		w.open = w.open[:len(w.open)-1]
	}()
	if st, ok := u.Underlying().(*types.Struct); ok {
		return w.fields(st, path, fieldPath, stack)
	}
	return w.check(u.Underlying(), path, nil, stack)
}

// basic records a hashed basic value and the kind of scalar it is.
func (w *fpWalk) basic(t types.Type, u *types.Basic, path string, fieldPath []string) bool {
	switch {
	case u.Info()&types.IsBoolean != 0:
		w.leaf(path, fieldPath, "bool")
	case u.Info()&types.IsInteger != 0 && u.Info()&types.IsUnsigned != 0:
		w.leaf(path, fieldPath, "uint")
	case u.Info()&types.IsInteger != 0:
		w.leaf(path, fieldPath, "int")
	case u.Info()&types.IsFloat != 0:
		w.leaf(path, fieldPath, "float")
	case u.Info()&types.IsComplex != 0:
		w.leaf(path, fieldPath, "complex")
	case u.Info()&types.IsString != 0:
		w.leaf(path, fieldPath, "string")
	default:
		return w.fail(t, path, "unsafe.Pointer is an address, not a value")
	}
	return true
}

// hiddenFields returns the fields of st that generated code in the user's
// package cannot read (unexported in another package, left-out ones
// aside), and that package's path.
func (w *fpWalk) hiddenFields(st *types.Struct) ([]string, string) {
	var hidden []string
	pkg := ""
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		if f.Exported() || f.Name() == "_" || f.Pkg() == w.b.pkg || omitted(st.Tag(i)) {
			continue
		}
		hidden = append(hidden, f.Name())
		pkg = f.Pkg().Path()
	}
	return hidden, pkg
}

// fields walks the fields of a struct. Problems inside a field declared in
// the user's package are reported at that field.
func (w *fpWalk) fields(st *types.Struct, path string, fieldPath []string, stack map[string]bool) bool {
	ok := true
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		fp := path + "." + f.Name()
		if f.Name() == "_" {
			continue
		}
		tag := parseIdemTag(st.Tag(i))
		if tag.problem != "" {
			w.b.e.Add(w.fieldPos(f), "field %s: %s", fp, tag.problem)
			ok = false
			continue
		}
		if tag.omit {
			w.m.Omitted = append(w.m.Omitted, fp)
			continue
		}
		if tag.emptyIsNil {
			switch f.Type().Underlying().(type) {
			case *types.Slice, *types.Map:
				w.alike = true
				w.emptyAlike = append(w.emptyAlike, fp)
			default:
				w.b.e.Add(w.fieldPos(f), "field %s: idem:\",emptyisnil\" applies to slices and maps, not %s", fp, types.TypeString(f.Type(), w.b.qualifier))
				ok = false
				continue
			}
		}
		var sub []string
		if fieldPath != nil {
			sub = append(append([]string{}, fieldPath...), f.Name())
		}
		outer := w.pos
		w.pos = w.fieldPos(f)
		if !w.check(f.Type(), fp, sub, stack) {
			ok = false
		}
		w.pos, w.alike = outer, false
	}
	return ok
}

// fieldPos is where a problem inside field f is reported: at f when the
// user's package declares it, else where the walk stands.
func (w *fpWalk) fieldPos(f *types.Var) token.Position {
	if f.Pkg() == w.b.pkg && f.Pos().IsValid() {
		return w.b.l.Pkg.Fset.Position(f.Pos())
	}
	return w.pos
}

// sawNilable records a slice or map: it tells nil from empty unless its
// field is tagged emptyisnil.
func (w *fpWalk) sawNilable() {
	if w.alike {
		w.alike = false
		return
	}
	w.nilDistinct = true
}

// encoding is what the doc comment must say about this request's encoding.
func (w *fpWalk) encoding() ir.Encoding {
	return ir.Encoding{Time: w.hasTime, NilDistinct: w.nilDistinct, Text: w.text, EmptyIsNil: w.emptyAlike, Proto: w.proto, RequestID: w.requestIDs}
}

// textMarshaler reports whether n (or *n, ptr) has MarshalText() ([]byte,
// error).
func textMarshaler(n *types.Named) (ptr, ok bool) {
	obj, _, _ := types.LookupFieldOrMethod(n, true, n.Obj().Pkg(), "MarshalText")
	fn, isFunc := obj.(*types.Func)
	if !isFunc {
		return false, false
	}
	sig := fn.Type().(*types.Signature)
	if sig.Params().Len() != 0 || sig.Results().Len() != 2 {
		return false, false
	}
	b, isSlice := sig.Results().At(0).Type().(*types.Slice)
	if !isSlice || !types.Identical(b.Elem(), types.Typ[types.Byte]) || !types.Identical(sig.Results().At(1).Type(), types.Universe.Lookup("error").Type()) {
		return false, false
	}
	_, ptr = sig.Recv().Type().(*types.Pointer)
	return ptr, true
}

func appendUnique(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}

// timeType returns time.Time when n is a defined type over time.Time's
// struct (type Date time.Time), else nil.
func timeType(n *types.Named) types.Type {
	st, ok := n.Underlying().(*types.Struct)
	if !ok || st.NumFields() == 0 || st.Field(0).Pkg() == nil || st.Field(0).Pkg().Path() != "time" {
		return nil
	}
	obj := st.Field(0).Pkg().Scope().Lookup("Time")
	if obj == nil || !types.Identical(obj.Type().Underlying(), st) {
		return nil
	}
	return obj.Type()
}

// leaf records a hashed value; kind != "" marks a scalar reachable through
// struct fields only, which a generated test may change (ir.Scalar).
func (w *fpWalk) leaf(path string, fieldPath []string, kind string) {
	w.m.Fingerprinted = append(w.m.Fingerprinted, path)
	if kind != "" && fieldPath != nil {
		w.m.Scalars = append(w.m.Scalars, ir.Scalar{Param: w.param, Path: fieldPath, Kind: kind})
	}
}
