package analyze

import (
	"fmt"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"
)

// The response rule: every caller, the first included, gets the response
// decoded from the JSON the ledger stores (runtime/idem), so a replay always
// equals the first answer. What this file refuses are types whose decoded
// value would differ from what the method returned: data encoding/json drops,
// or writes in a form it does not read back. A NaN or infinite float and a
// string that is not valid UTF-8 are values, not types: the runtime refuses
// them when it encodes (before COMMIT in atomic mode).

// respFix ends every refusal: the three ways out.
const respFix = "change the type, tag the field json:\"-\" (every caller then gets its zero value), or give the type MarshalJSON and UnmarshalJSON methods that round-trip"

// jsonNameFix ends a refusal of fields that share a JSON name.
const jsonNameFix = "give one of them another name with a json tag, or tag it json:\"-\""

// respWalk checks one response type.
type respWalk struct {
	b    *builder
	seen map[string]bool // named types (and addressability) already checked
}

// checkResponse reports whether t survives the JSON round trip unchanged,
// reporting each problem at the position of the field that holds it (pos
// when it is not a field of the package being generated).
func (b *builder) checkResponse(t types.Type, pos token.Position, path string) bool {
	w := &respWalk{b: b, seen: map[string]bool{}}
	// json.Marshal(v) gets a copy: the top level is not addressable.
	return w.check(t, pos, path, false)
}

func (w *respWalk) rel(t types.Type) string {
	return types.TypeString(t, types.RelativeTo(w.b.pkg))
}

// fail refuses t at path with why and respFix; failFix names its own fix.
func (w *respWalk) fail(pos token.Position, path string, t types.Type, why string) bool {
	return w.failFix(pos, path, t, why, respFix)
}

func (w *respWalk) failFix(pos token.Position, path string, t types.Type, why, fix string) bool {
	w.b.e.Add(pos, "%s (%s) would not replay as returned: %s; %s", path, w.rel(t), why, fix)
	return false
}

// check walks t at path. addressable reports whether encoding/json sees the
// value addressable there (behind a pointer, in a slice), which decides
// whether a pointer-receiver MarshalJSON or MarshalText is called.
func (w *respWalk) check(t types.Type, pos token.Position, path string, addressable bool) bool {
	if protoPointer(t) || protoMessage(t) {
		rel := types.TypeString(t, w.b.qualifier)
		ptr := rel
		if !protoPointer(t) {
			ptr = "*" + rel
		}
		w.b.e.Add(pos, "%s (%s) would not replay as returned: it is a protobuf message inside a response stored as JSON, and encoding/json drops the message's internal state and writes oneofs and well-known types in another form than protobuf's; "+
			"return the message itself (%s), which is stored in protobuf's binary form, or copy its fields into plain ones", path, rel, ptr)
		return false
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		obj := n.Obj()
		if obj.Pkg() == nil {
			return w.fail(pos, path, t, "an interface decodes to a different type")
		}
		if obj.Pkg().Path() == "encoding/json" && obj.Name() == "RawMessage" {
			return w.fail(pos, path, t, "encoding/json compacts a RawMessage and turns a nil one into the bytes null")
		}
		if done, ok := w.codec(t, pos, path, addressable); done {
			return ok
		}
		key := fmt.Sprintf("%s|%t", qualified(n), addressable)
		if w.seen[key] {
			return true
		}
		w.seen[key] = true
		if st, ok := n.Underlying().(*types.Struct); ok {
			return w.fields(st, pos, path, addressable)
		}
		return w.check(n.Underlying(), pos, path, addressable)
	}
	switch u := types.Unalias(t).(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsComplex != 0:
			return w.fail(pos, path, t, "encoding/json cannot encode complex numbers")
		case u.Kind() == types.UnsafePointer:
			return w.fail(pos, path, t, "unsafe.Pointer is an address")
		}
		return true
	case *types.Pointer:
		switch types.Unalias(u.Elem()).Underlying().(type) {
		case *types.Pointer, *types.Slice, *types.Map:
			return w.fail(pos, path, t, "a non-nil pointer to a nil "+kindName(u.Elem())+" is stored as null and comes back as a nil pointer")
		}
		return w.check(u.Elem(), pos, path, true)
	case *types.Slice:
		return w.check(u.Elem(), pos, path+"[]", true)
	case *types.Array:
		return w.check(u.Elem(), pos, path+"[]", addressable)
	case *types.Map:
		kb, ok := u.Key().Underlying().(*types.Basic)
		text := hasMethod(u.Key(), "MarshalText", false) && hasMethod(u.Key(), "UnmarshalText", true)
		if !(ok && (kb.Info()&types.IsString != 0 || kb.Info()&types.IsInteger != 0)) && !text {
			return w.fail(pos, path, t, "its keys are neither strings, integers nor encoding.TextMarshaler")
		}
		// encoding/json decodes every key whose type has UnmarshalText
		// through it, but encodes a string-kind key as the string itself
		// and a key without a value-receiver MarshalText as a number.
		if hasMethod(u.Key(), "UnmarshalText", true) {
			switch {
			case ok && kb.Info()&types.IsString != 0:
				return w.failFix(pos, path, t, fmt.Sprintf("encoding/json writes its %s keys as plain strings but reads them back through UnmarshalText, which need not give the same key", w.rel(u.Key())), "use string keys (convert at the edges), or a key type without UnmarshalText")
			case !hasMethod(u.Key(), "MarshalText", false):
				return w.failFix(pos, path, t, fmt.Sprintf("encoding/json reads its %s keys back through UnmarshalText, but writes them as numbers (they have no value-receiver MarshalText)", w.rel(u.Key())), "give the key type a value-receiver MarshalText that UnmarshalText reverses, or use a key type without UnmarshalText")
			}
		}
		return w.check(u.Elem(), pos, path+"[key]", false)
	case *types.Struct:
		return w.fields(u, pos, path, addressable)
	case *types.Interface:
		return w.fail(pos, path, t, "an interface decodes to a different type (map[string]any, float64, ...)")
	case *types.Chan:
		return w.fail(pos, path, t, "a channel cannot be stored")
	case *types.Signature:
		return w.fail(pos, path, t, "a function cannot be stored")
	case *types.TypeParam:
		return w.fail(pos, path, t, "a type parameter's type is not known at generate time")
	}
	return w.fail(pos, path, t, "this kind of type is not supported")
}

func kindName(t types.Type) string {
	switch t.Underlying().(type) {
	case *types.Pointer:
		return "pointer"
	case *types.Slice:
		return "slice"
	}
	return "map"
}

// codec decides a named type that encodes itself: done reports that the
// type's methods settle it (ok or refused), so its fields are not walked.
func (w *respWalk) codec(t types.Type, pos token.Position, path string, addressable bool) (done, ok bool) {
	for _, pair := range [][2]string{{"MarshalJSON", "UnmarshalJSON"}, {"MarshalText", "UnmarshalText"}} {
		mValue, mPtr := hasMethod(t, pair[0], false), hasMethod(t, pair[0], true)
		unm := hasMethod(t, pair[1], true)
		marshals := mValue || mPtr && addressable
		switch {
		case !mPtr && !unm:
			continue // neither: the next pair, or the fields
		case mPtr && !mValue && !addressable && unm:
			return true, w.failFix(pos, path, t, pair[0]+" has a pointer receiver, so encoding/json does not call it on this value (it is not addressable here) while decoding calls "+pair[1],
				"make the field a pointer, give "+pair[0]+" a value receiver, or tag the field json:\"-\" (every caller then gets its zero value)")
		case marshals && !unm:
			return true, w.fail(pos, path, t, "it has "+pair[0]+" but no "+pair[1]+", so the stored form is not read back")
		case !mPtr && unm:
			return true, w.fail(pos, path, t, "it has "+pair[1]+" but no "+pair[0]+", so what is stored is not the form it reads")
		}
		if st, isStruct := t.Underlying().(*types.Struct); isStruct && st.NumFields() > 1 {
			if obj, index, _ := types.LookupFieldOrMethod(t, true, nil, pair[0]); obj != nil && len(index) > 1 {
				return true, w.fail(pos, path, t, "its "+pair[0]+" is promoted from an embedded field and encodes that field alone, so its other fields are not stored")
			}
		}
		return true, true
	}
	return false, false
}

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	name   string
	tagged bool
	depth  int
	v      *types.Var
	path   string
	pos    token.Position
	addr   bool
}

// fields applies encoding/json's field rules to st: unexported fields are
// dropped, embedded structs without a name tag are flattened, and of the
// fields sharing a JSON name only the shallowest (or the one tagged, among
// equals) is kept. Anything dropped that holds data is refused.
func (w *respWalk) fields(st *types.Struct, pos token.Position, path string, addressable bool) bool {
	all, ok := w.jsonFields(st, pos, path, addressable)
	return w.dominant(all) && ok
}

// level is one depth of embedded structs that jsonFields walks.
type level struct {
	st    *types.Struct
	path  string
	pos   token.Position
	addr  bool
	depth int
}

// refuseEmbedded refuses an embedded field of an unexported type that
// encoding/json cannot use, and reports whether it did.
func (w *respWalk) refuseEmbedded(f *types.Var, pos token.Position, path string, innerStruct, isPtr bool) bool {
	switch {
	case f.Exported():
		return false
	case !innerStruct:
		return !w.fail(pos, path, f.Type(), "encoding/json ignores an embedded field of an unexported non-struct type")
	case isPtr:
		return !w.failFix(pos, path, f.Type(), "encoding/json cannot set an embedded pointer to an unexported struct when it decodes", "embed the struct by value, export its type, or tag the field json:\"-\"")
	}
	return false
}

// jsonFields lists the fields encoding/json sees in st, flattening
// embedded structs breadth first, and refuses the ones it drops though
// they hold data.
func (w *respWalk) jsonFields(st *types.Struct, pos token.Position, path string, addressable bool) ([]jsonField, bool) {
	ok := true
	var all []jsonField
	visited := map[*types.Struct]bool{}
	hidden := map[string]token.Position{} // structs of other packages with unexported fields
	var hiddenOrder []string
	for cur := []level{{st, path, pos, addressable, 0}}; len(cur) > 0; {
		var next []level
		for _, l := range cur {
			if visited[l.st] {
				continue
			}
			visited[l.st] = true
			for i := 0; i < l.st.NumFields(); i++ {
				f := l.st.Field(i)
				fpos := l.pos
				if f.Pkg() == w.b.pkg {
					fpos = w.b.l.Pkg.Fset.Position(f.Pos())
				}
				fpath := l.path + "." + f.Name()
				tag, _ := reflect.StructTag(l.st.Tag(i)).Lookup("json")
				if tag == "-" || f.Name() == "_" {
					continue // declared not stored: every caller gets the zero value
				}
				ft := types.Unalias(f.Type())
				ptr, isPtr := ft.(*types.Pointer)
				inner := ft
				if isPtr {
					inner = types.Unalias(ptr.Elem())
				}
				_, innerStruct := inner.Underlying().(*types.Struct)
				if f.Embedded() {
					if w.refuseEmbedded(f, fpos, fpath, innerStruct, isPtr) {
						ok = false
						continue
					}
				} else if !f.Exported() {
					if f.Pkg() != w.b.pkg {
						if _, dup := hidden[l.path]; !dup {
							hidden[l.path] = l.pos
							hiddenOrder = append(hiddenOrder, l.path)
						}
						continue
					}
					w.b.e.Add(fpos, "%s (%s) would not replay as returned: the field is unexported, and encoding/json drops it; export it, or tag it json:\"-\" (every caller then gets its zero value)", fpath, w.rel(f.Type()))
					ok = false
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validJSONName(name) {
					name = ""
				}
				if name == "" && f.Embedded() && innerStruct {
					next = append(next, level{inner.Underlying().(*types.Struct), fpath, fpos, l.addr || isPtr, l.depth + 1})
					continue
				}
				jf := jsonField{name: name, tagged: name != "", depth: l.depth, v: f, path: fpath, pos: fpos, addr: l.addr}
				if jf.name == "" {
					jf.name = f.Name()
				}
				all = append(all, jf)
			}
		}
		cur = next
	}
	for _, p := range hiddenOrder {
		w.b.e.Add(hidden[p], "%s would not replay as returned: its type, from another package, has unexported fields that encoding/json drops; %s", p, respFix)
		ok = false
	}
	return all, ok
}

// dominant keeps, of the fields sharing a JSON name, the one encoding/json
// keeps (the shallowest, or the one tagged among equals) and checks it;
// the others are refused.
func (w *respWalk) dominant(all []jsonField) bool {
	ok := true
	byName := map[string][]jsonField{}
	var names []string
	for _, f := range all {
		if byName[f.name] == nil {
			names = append(names, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	sort.Strings(names)
	for _, n := range names {
		fs := byName[n]
		sort.SliceStable(fs, func(i, j int) bool {
			if fs[i].depth != fs[j].depth {
				return fs[i].depth < fs[j].depth
			}
			return fs[i].tagged && !fs[j].tagged
		})
		winner := -1
		top := fs[0].depth
		tied := 0
		taggedTop := 0
		for _, f := range fs {
			if f.depth == top {
				tied++
				if f.tagged {
					taggedTop++
				}
			}
		}
		if tied == 1 || taggedTop == 1 {
			winner = 0
		}
		for i, f := range fs {
			switch {
			case i == winner:
				ok = w.check(f.v.Type(), f.pos, f.path, f.addr) && ok
			case winner < 0:
				others := []string{}
				for j, g := range fs {
					if j != i && g.depth == top {
						others = append(others, strings.TrimPrefix(g.path, "the response "))
					}
				}
				if f.depth == top {
					ok = w.failFix(f.pos, f.path, f.v.Type(), fmt.Sprintf("its JSON name %q is shared with %s at the same depth, and encoding/json drops both", n, strings.Join(others, " and ")), jsonNameFix) && ok
				} else {
					ok = w.failFix(f.pos, f.path, f.v.Type(), fmt.Sprintf("its JSON name %q is taken by a shallower field, so encoding/json drops it", n), jsonNameFix) && ok
				}
			default:
				ok = w.failFix(f.pos, f.path, f.v.Type(), fmt.Sprintf("its JSON name %q is also %s's, which wins, so encoding/json drops this one", n, strings.TrimPrefix(fs[winner].path, "the response ")), jsonNameFix) && ok
			}
		}
	}
	return ok
}

// validJSONName mirrors encoding/json's isValidTag.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c > 127):
			return false
		}
	}
	return true
}

// hasMethod reports whether t (or *t, when pointer is set) has the method.
func hasMethod(t types.Type, name string, pointer bool) bool {
	if pointer {
		if _, isPtr := t.(*types.Pointer); !isPtr {
			t = types.NewPointer(t)
		}
	}
	sel := types.NewMethodSet(t).Lookup(nil, name)
	return sel != nil
}
