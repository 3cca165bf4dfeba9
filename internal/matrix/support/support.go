// Package support draws random values of any matrix type and compares
// requests as their fingerprint must. The matrix test copies this file into
// the generated module's test package.
package support

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/idemgen/idemgen/runtime/idemproto/testpb"
)

// protoType is the interface of protobuf messages.
var protoType = reflect.TypeFor[proto.Message]()

// isProto reports whether t is a pointer to a protobuf message.
func isProto(t reflect.Type) bool { return t.Kind() == reflect.Pointer && t.Implements(protoType) }

// protoBytes is a message's deterministic binary form: two messages are
// the same request, and the same answer, when theirs are equal (fields by
// number, floats by bits, maps sorted, presence kept); nil for nil.
func protoBytes(v reflect.Value) []byte {
	if v.IsNil() {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v.Interface().(proto.Message))
	if err != nil {
		panic(fmt.Sprintf("marshal a drawn %s: %v", v.Type(), err))
	}
	return append([]byte{1}, b...)
}

// Equal reports whether a replay equals the first answer: proto.Equal for
// protobuf messages, reflect.DeepEqual otherwise.
func Equal(a, b any) bool {
	if m, ok := a.(proto.Message); ok {
		return proto.Equal(m, b.(proto.Message))
	}
	return reflect.DeepEqual(a, b)
}

// Draw returns a random T. Structs get every exported field drawn;
// unexported fields stay zero. Types with unexported state that the matrix
// uses (time.Time, netip.Addr, big.Int) are built through their
// constructors.
func Draw[T any](t *rapid.T) T {
	var v T
	fill(t, reflect.ValueOf(&v).Elem(), 0)
	return v
}

var (
	timeType = reflect.TypeFor[time.Time]()
	addrType = reflect.TypeFor[netip.Addr]()
	bigType  = reflect.TypeFor[big.Int]()
	numType  = reflect.TypeFor[json.Number]()
	tstzType = reflect.TypeFor[pgtype.Timestamptz]()
)

func fill(t *rapid.T, v reflect.Value, depth int) {
	switch v.Type() {
	case timeType:
		sec := rapid.Int64Range(-1<<34, 1<<34).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
		zones := []*time.Location{time.UTC, time.Local, time.FixedZone("X", 3600), time.FixedZone("", -5*3600)}
		tm := time.Unix(sec, nsec).In(zones[rapid.IntRange(0, len(zones)-1).Draw(t, "zone")])
		if rapid.Bool().Draw(t, "now") {
			tm = time.Now() // with a monotonic reading
		}
		v.Set(reflect.ValueOf(tm))
		return
	case addrType:
		b := rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "ip4")
		v.Set(reflect.ValueOf(netip.AddrFrom4([4]byte(b))))
		return
	case numType: // only number literals are json.Numbers
		v.SetString(strconv.FormatFloat(rapid.Float64().Draw(t, "number"), 'g', -1, 64))
		return
	case tstzType: // InfinityModifier is one of three values
		var ts pgtype.Timestamptz
		fill(t, reflect.ValueOf(&ts.Time).Elem(), depth+1)
		ts.Valid = rapid.Bool().Draw(t, "valid")
		ts.InfinityModifier = pgtype.InfinityModifier(rapid.IntRange(-1, 1).Draw(t, "infinity"))
		v.Set(reflect.ValueOf(ts))
		return
	case bigType:
		v.Set(reflect.ValueOf(*big.NewInt(rapid.Int64().Draw(t, "big"))))
		return
	}
	if !v.CanSet() {
		return
	}
	if isProto(v.Type()) { // testpb.Fill draws the message's fields
		if rapid.IntRange(0, 3).Draw(t, "nil") == 0 {
			return
		}
		seed := rapid.Uint64().Draw(t, "seed")
		m := reflect.New(v.Type().Elem())
		testpb.Fill(m.Interface().(proto.Message), rand.New(rand.NewPCG(seed, seed)))
		v.Set(m)
		return
	}
	deep := depth > 3
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, "bool"))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rapid.Int64Range(minInt(v.Type().Bits()), maxInt(v.Type().Bits())).Draw(t, "int"))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(rapid.Uint64Range(0, math.MaxUint64>>(64-v.Type().Bits())).Draw(t, "uint"))
	case reflect.Float32:
		v.SetFloat(float64(rapid.Float32().Draw(t, "float32")))
	case reflect.Float64:
		v.SetFloat(rapid.Float64().Draw(t, "float64"))
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(float64(rapid.Float32().Draw(t, "re")), float64(rapid.Float32().Draw(t, "im"))))
	case reflect.String:
		v.SetString(rapid.String().Draw(t, "string"))
	case reflect.Pointer:
		if deep || rapid.IntRange(0, 3).Draw(t, "nil") == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		switch rapid.IntRange(0, 4).Draw(t, "nil") {
		case 0:
			return
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return
		}
		n := rapid.IntRange(0, 3).Draw(t, "len")
		if deep {
			n = 0
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(t, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), depth+1)
		}
	case reflect.Map:
		switch rapid.IntRange(0, 4).Draw(t, "nil") {
		case 0:
			return
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
			return
		}
		m := reflect.MakeMap(v.Type())
		n := rapid.IntRange(0, 3).Draw(t, "len")
		if deep {
			n = 0
		}
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, k, depth+1)
			fill(t, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), depth+1)
			}
		}
	}
}

func minInt(bits int) int64 { return -1 << (bits - 1) }
func maxInt(bits int) int64 { return 1<<(bits-1) - 1 }

// Copy returns a deep copy of v whose maps are built in another order.
func Copy[T any](v T) T {
	var out T
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(v))
	return out
}

func copyValue(dst, src reflect.Value) {
	if isProto(src.Type()) { // through the wire form: its maps are built anew
		if src.IsNil() {
			return
		}
		b, err := proto.Marshal(src.Interface().(proto.Message))
		if err != nil {
			panic(fmt.Sprintf("marshal a drawn %s: %v", src.Type(), err))
		}
		m := reflect.New(src.Type().Elem())
		if err := proto.Unmarshal(b, m.Interface().(proto.Message)); err != nil {
			panic(fmt.Sprintf("unmarshal a drawn %s: %v", src.Type(), err))
		}
		dst.Set(m)
		return
	}
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Array:
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMap(src.Type())
		keys := src.MapKeys()
		for i := len(keys) - 1; i >= 0; i-- { // another insertion order
			e := reflect.New(src.Type().Elem()).Elem()
			copyValue(e, src.MapIndex(keys[i]))
			m.SetMapIndex(keys[i], e)
		}
		dst.Set(m)
	case reflect.Struct:
		if !exportedOnly(src.Type()) {
			dst.Set(src)
			return
		}
		for i := range src.NumField() {
			copyValue(dst.Field(i), src.Field(i))
		}
	default:
		dst.Set(src)
	}
}

// textOf returns the MarshalText form of a struct with unexported fields
// (netip.Addr, big.Int): what the fingerprint hashes of it.
func textOf(v reflect.Value) ([]byte, bool) {
	if v.Kind() != reflect.Struct || exportedOnly(v.Type()) {
		return nil, false
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	m, ok := p.Interface().(encoding.TextMarshaler)
	if !ok {
		return nil, false
	}
	b, err := m.MarshalText()
	if err != nil {
		panic(fmt.Sprintf("MarshalText of a drawn %s: %v", v.Type(), err))
	}
	return b, true
}

func exportedOnly(t reflect.Type) bool {
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

// Same reports whether two requests are the same request as the
// generated doc comments define it: floats by their bits, times by their
// instant, types with unexported fields by their text form, a nil slice or
// map distinct from an empty one unless its field is tagged
// idem:",emptyisnil", fields tagged idem:"-" ignored.
func Same(a, b any) bool { return same(reflect.ValueOf(a), reflect.ValueOf(b), false) }

// same compares a and b; emptyIsNil: they are a field tagged emptyisnil.
func same(a, b reflect.Value, emptyIsNil bool) bool {
	if a.Type() == timeType {
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	}
	if ta, ok := textOf(a); ok {
		tb, _ := textOf(b)
		return bytes.Equal(ta, tb)
	}
	if isProto(a.Type()) {
		return bytes.Equal(protoBytes(a), protoBytes(b))
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return same(a.Elem(), b.Elem(), false)
	case reflect.Slice, reflect.Map:
		if emptyIsNil && a.Len() == 0 && b.Len() == 0 {
			return true
		}
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Kind() == reflect.Map {
			for _, k := range a.MapKeys() {
				bv := b.MapIndex(k)
				if !bv.IsValid() || !same(a.MapIndex(k), bv, false) {
					return false
				}
			}
			return true
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !same(a.Index(i), b.Index(i), false) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if f.Tag.Get("idem") == "-" || f.Name == "_" {
				continue
			}
			if !f.IsExported() {
				continue
			}
			if !same(a.Field(i), b.Field(i), f.Tag.Get("idem") == ",emptyisnil") {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// Emptied returns a deep copy of v in which every nil slice and map is
// empty instead: the retry that sends [] or {} where the first request
// sent nothing.
func Emptied[T any](v T) T {
	out := Copy(v)
	empty(reflect.ValueOf(&out).Elem())
	return out
}

func empty(v reflect.Value) {
	if v.Type() == timeType {
		return
	}
	if _, ok := textOf(v); ok {
		return
	}
	if isProto(v.Type()) { // an empty repeated field or map is unset
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			empty(v.Elem())
		}
	case reflect.Slice:
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		for i := range v.Len() {
			empty(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			empty(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			empty(e)
			v.SetMapIndex(iter.Key(), e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				empty(v.Field(i))
			}
		}
	}
}

// NilDiffers reports whether the rule the generated doc comment must
// state applies to T: some slice or map that a request of type T can hold
// (not behind idem:"-") tells nil from empty, because its field is not
// tagged idem:",emptyisnil". Tagged reports whether some field is tagged.
func NilDiffers[T any]() (differs, tagged bool) {
	var r rule
	r.walk(reflect.TypeFor[T](), false, map[reflect.Type]bool{})
	return r.differs, r.tagged
}

type rule struct{ differs, tagged bool }

func (r *rule) walk(t reflect.Type, emptyIsNil bool, seen map[reflect.Type]bool) {
	if t == timeType || t.Kind() == reflect.Struct && !exportedOnly(t) && reflect.PointerTo(t).Implements(textMarshalerType) || isProto(t) {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Map:
		if !emptyIsNil {
			r.differs = true
		}
		if seen[t] {
			return
		}
		seen[t] = true
		if t.Kind() == reflect.Map {
			r.walk(t.Key(), false, seen)
		}
		r.walk(t.Elem(), false, seen)
	case reflect.Pointer, reflect.Array:
		if seen[t] {
			return
		}
		seen[t] = true
		r.walk(t.Elem(), false, seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("idem")
			if tag == "-" || f.Name == "_" {
				continue
			}
			r.tagged = r.tagged || tag == ",emptyisnil"
			r.walk(f.Type, tag == ",emptyisnil", seen)
		}
	}
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
