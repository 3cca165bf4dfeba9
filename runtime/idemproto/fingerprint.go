package idemproto

import (
	"cmp"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Version names the encoding [Fingerprint] writes. It changes only when
// that encoding changes, which makes every fingerprint of a message differ
// (a retry across such an upgrade is refused as a mismatch, never replayed
// wrongly).
const Version = 1

// versionTag starts every message's encoding.
const versionTag = "idemproto"

// anyName is the full name of google.protobuf.Any.
const anyName protoreflect.FullName = "google.protobuf.Any"

// Fingerprint writes m into f by its populated fields in field-number
// order (see the package doc): the fingerprint of a request argument or
// field of a protobuf message type. A nil message is written as nil.
// Fields of m itself (not of its nested messages) named in omit are left
// out: generated code names an AIP-155 request_id there, which is the
// idempotency key, not part of the request.
func Fingerprint(f *idem.Fingerprinter, m proto.Message, omit ...protoreflect.Name) {
	f.String(versionTag)
	f.Uint(Version)
	if m == nil {
		f.Nil()
		return
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		f.Nil()
		return
	}
	f.Ptr()
	message(f, r, omit)
}

// field is one populated field of a message.
type field struct {
	fd protoreflect.FieldDescriptor
	v  protoreflect.Value
}

// message writes the populated fields of r, a valid message: their count,
// then each field's number and value, by number. A message that holds
// itself (a cycle of Go pointers) is written as a back reference where it
// recurs (idem.Fingerprinter.Enter).
func message(f *idem.Fingerprinter, r protoreflect.Message, omit []protoreflect.Name) {
	if r.Descriptor().FullName() == anyName {
		anyMessage(f, r)
		return
	}
	if !f.Enter(r.Interface()) {
		return
	}
	defer f.Leave()
	var fields []field
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !fd.IsExtension() && slices.Contains(omit, fd.Name()) {
			return true
		}
		fields = append(fields, field{fd, v})
		return true
	})
	slices.SortFunc(fields, func(a, b field) int { return cmp.Compare(a.fd.Number(), b.fd.Number()) })
	f.Len(len(fields))
	for _, fl := range fields {
		f.Uint(uint64(fl.fd.Number()))
		value(f, fl.fd, fl.v)
	}
}

// value writes a field's value: a list, a map, or one value.
func value(f *idem.Fingerprinter, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch {
	case fd.IsList():
		l := v.List()
		f.Len(l.Len())
		for i := range l.Len() {
			single(f, fd, l.Get(i))
		}
	case fd.IsMap():
		mp := v.Map()
		keys := make([]protoreflect.MapKey, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		slices.SortFunc(keys, compareKeys(fd.MapKey().Kind()))
		f.Len(len(keys))
		for _, k := range keys {
			single(f, fd.MapKey(), k.Value())
			single(f, fd.MapValue(), mp.Get(k))
		}
	default:
		single(f, fd, v)
	}
}

// single writes one value of fd's kind.
func single(f *idem.Fingerprinter, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		f.Bool(v.Bool())
	case protoreflect.EnumKind:
		f.Int(int64(v.Enum()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		f.Int(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		f.Uint(v.Uint())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		x := v.Float()
		if math.IsNaN(x) {
			x = math.NaN() // proto.Equal holds every NaN equal
		}
		f.Float(x)
	case protoreflect.StringKind:
		f.String(v.String())
	case protoreflect.BytesKind:
		b := v.Bytes()
		if b == nil {
			b = []byte{} // nil and empty are the same bytes on the wire
		}
		f.Bytes(b)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m := v.Message()
		if !m.IsValid() { // a nil element of a repeated field or map
			f.Nil()
			return
		}
		message(f, m, nil)
	}
}

// compareKeys orders map keys of one kind: false before true, numbers by
// value, strings bytewise.
func compareKeys(k protoreflect.Kind) func(a, b protoreflect.MapKey) int {
	switch k {
	case protoreflect.BoolKind:
		return func(a, b protoreflect.MapKey) int {
			x, y := a.Bool(), b.Bool()
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case protoreflect.StringKind:
		return func(a, b protoreflect.MapKey) int { return cmp.Compare(a.String(), b.String()) }
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return func(a, b protoreflect.MapKey) int { return cmp.Compare(a.Uint(), b.Uint()) }
	}
	return func(a, b protoreflect.MapKey) int { return cmp.Compare(a.Int(), b.Int()) }
}

// anyMessage writes a google.protobuf.Any: its type URL and the message
// it holds when the type is linked in (two serializations of one message
// are one request), else its type URL and raw bytes.
func anyMessage(f *idem.Fingerprinter, r protoreflect.Message) {
	fds := r.Descriptor().Fields()
	url := r.Get(fds.ByNumber(1)).String()
	raw := r.Get(fds.ByNumber(2)).Bytes()
	if mt, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil {
		inner := mt.New()
		if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(raw, inner.Interface()); err == nil {
			f.String("any")
			f.String(url)
			message(f, inner, nil)
			return
		}
	}
	f.String("any-raw")
	f.String(url)
	if raw == nil {
		raw = []byte{}
	}
	f.Bytes(raw)
}
