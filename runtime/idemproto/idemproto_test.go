package idemproto_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemproto"
	"github.com/idemgen/idemgen/runtime/idemproto/testpb"
)

// copyOf copies m through its binary form (proto.Clone drops a proto3
// float field set to -0, which the wire format and Has keep).
func copyOf[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	if !m.ProtoReflect().IsValid() {
		return m
	}
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	out := m.ProtoReflect().New().Interface()
	require.NoError(t, proto.Unmarshal(b, out))
	return out.(M)
}

func fp(m proto.Message) []byte {
	f := idem.NewFingerprinter("T.M")
	idemproto.Fingerprint(f, m)
	return f.Sum()
}

// random returns n random messages, reproducible from the seed.
func random(seed uint64, n int) []*testpb.Everything {
	rnd := rand.New(rand.NewPCG(seed, seed))
	out := make([]*testpb.Everything, n)
	for i := range out {
		out[i] = &testpb.Everything{}
		testpb.Fill(out[i], rnd)
	}
	return out
}

// same is the definition of one request the fingerprint must follow: the
// same deterministic binary form (field by field, floats by bits, maps
// sorted) once NaNs are one value and unknown fields are dropped.
func same(t *testing.T, a, b proto.Message) bool {
	t.Helper()
	enc := func(m proto.Message) []byte {
		c := copyOf(t, m)
		canonical(c.ProtoReflect())
		out, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		require.NoError(t, err)
		return out
	}
	return bytes.Equal(enc(a), enc(b))
}

// canonical drops unknown fields, makes every NaN the same NaN and every
// Any hold its message in deterministic form.
func canonical(r protoreflect.Message) {
	r.SetUnknown(nil)
	if r.Descriptor().FullName() == "google.protobuf.Any" {
		a := r.Interface().(*anypb.Any)
		if m, err := a.UnmarshalNew(); err == nil {
			canonical(m.ProtoReflect())
			a.Value, _ = proto.MarshalOptions{Deterministic: true}.Marshal(m)
		}
		return
	}
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		nan := func(v protoreflect.Value) protoreflect.Value {
			if math.IsNaN(v.Float()) {
				if fd.Kind() == protoreflect.FloatKind || fd.IsMap() && fd.MapValue().Kind() == protoreflect.FloatKind {
					return protoreflect.ValueOfFloat32(float32(math.NaN()))
				}
				return protoreflect.ValueOfFloat64(math.NaN())
			}
			return v
		}
		kind := fd.Kind()
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if kind == protoreflect.MessageKind {
					canonical(l.Get(i).Message())
				} else if kind == protoreflect.FloatKind || kind == protoreflect.DoubleKind {
					l.Set(i, nan(l.Get(i)))
				}
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					canonical(mv.Message())
				}
				return true
			})
		case kind == protoreflect.MessageKind:
			canonical(v.Message())
		case kind == protoreflect.FloatKind || kind == protoreflect.DoubleKind:
			r.Set(fd, nan(v))
		}
		return true
	})
}

// TestFingerprintIsTheRequest: over random messages, two fingerprints are
// equal exactly when the messages are the same request, and a message
// fingerprints as its copy sent over the wire (binary, in any map order)
// or as JSON (Connect's codec) does.
func TestFingerprintIsTheRequest(t *testing.T) {
	ms := random(1, 400)
	equalPairs, jsonOK := 0, 0
	for i, a := range ms {
		b := ms[(i+1)%len(ms)]
		if i%7 == 0 {
			b = copyOf(t, a) // equal pairs, too
		}
		eq := same(t, a, b)
		if eq {
			equalPairs++
		}
		require.Equal(t, eq, bytes.Equal(fp(a), fp(b)), "same request %v, but equal fingerprints %v:\n%v\n%v", eq, !eq, a, b)

		wire, err := proto.Marshal(a) // not deterministic: maps in any order
		require.NoError(t, err)
		back := &testpb.Everything{}
		require.NoError(t, proto.Unmarshal(wire, back))
		require.Equal(t, fp(a), fp(back), "after a binary round trip: %v", a)

		js, err := protojson.Marshal(a)
		if err != nil {
			continue // JSON refuses a Timestamp or Duration out of range, and a Struct's NaN
		}
		jsonOK++
		fromJSON := &testpb.Everything{}
		require.NoError(t, protojson.Unmarshal(js, fromJSON))
		require.Equal(t, fp(a), fp(fromJSON), "after a JSON round trip: %s", js)
	}
	require.Greater(t, jsonOK, len(ms)/4, "too few messages went through JSON")
	require.Greater(t, equalPairs, len(ms)/10, "the property needs equal pairs as well as different ones")
}

// TestFingerprintPresence: presence counts where the message records it.
func TestFingerprintPresence(t *testing.T) {
	zero := int64(0)
	empty := ""
	unset := fp(&testpb.Everything{})
	for name, m := range map[string]*testpb.Everything{
		"optional set to zero":     {OptI64: &zero},
		"optional string empty":    {OptS: &empty},
		"message field empty":      {Inner: &testpb.Inner{}},
		"oneof member set to zero": {Choice: &testpb.Everything_Text{}},
		"oneof message empty":      {Choice: &testpb.Everything_Nested{Nested: &testpb.Inner{}}},
		"wrapper of zero":          {MaybeN: wrapperspb.Int64(0)},
		"timestamp at the epoch":   {At: &timestamppb.Timestamp{}},
		"struct null value":        {Attrs: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewNullValue()}}},
	} {
		assert.NotEqual(t, unset, fp(m), name)
	}
	assert.Equal(t, unset, fp(&testpb.Everything{I64: 0, S: "", Nums: []int64{}, Counts: map[string]int64{}}),
		"fields without presence set to zero, and empty repeated fields and maps, are unset")
	assert.NotEqual(t, fp(&testpb.Everything{Choice: &testpb.Everything_Text{}}), fp(&testpb.Everything{Choice: &testpb.Everything_Number{}}),
		"two oneof members set to zero are different requests")
	assert.NotEqual(t, fp((*testpb.Everything)(nil)), unset, "a nil message differs from an empty one")
	assert.Equal(t, fp((*testpb.Everything)(nil)), fp(nil))
	assert.Equal(t, fp(&testpb.Everything{By: nil, Blobs: [][]byte{nil}}), fp(&testpb.Everything{By: []byte{}, Blobs: [][]byte{{}}}))
}

// TestFingerprintValues: floats by bits with one NaN, and every field's
// value counts.
func TestFingerprintValues(t *testing.T) {
	nan2 := math.Float64frombits(math.Float64bits(math.NaN()) ^ 1)
	assert.Equal(t, fp(&testpb.Everything{Db: math.NaN()}), fp(&testpb.Everything{Db: nan2}))
	assert.NotEqual(t, fp(&testpb.Everything{Db: math.Copysign(0, -1)}), fp(&testpb.Everything{}))
	assert.NotEqual(t, fp(&testpb.Everything{Fl: 1}), fp(&testpb.Everything{Db: 1}), "fields are told apart by number")
	assert.NotEqual(t, fp(&testpb.Everything{Nums: []int64{1, 2}}), fp(&testpb.Everything{Nums: []int64{2, 1}}))
	assert.NotEqual(t, fp(&testpb.Everything{Strs: []string{"ab"}}), fp(&testpb.Everything{Strs: []string{"a", "b"}}))
	assert.NotEqual(t, fp(&testpb.Everything{Counts: map[string]int64{"a": 1}}), fp(&testpb.Everything{Counts: map[string]int64{"a": 2}}))
	assert.NotEqual(t, fp(&testpb.Everything{Flags: map[bool]string{true: "x"}}), fp(&testpb.Everything{Flags: map[bool]string{false: "x"}}))
	assert.NotEqual(t, fp(&testpb.Everything{Color: testpb.Color_COLOR_RED}), fp(&testpb.Everything{Color: testpb.Color_COLOR_GREEN}))
	assert.NotEqual(t, fp(&testpb.Everything{At: timestamppb.New(timestamppb.Now().AsTime())}), fp(&testpb.Everything{At: &timestamppb.Timestamp{Seconds: 1}}))
}

// TestFingerprintIgnoresUnknownFields: a field the server's message does
// not know (sent by a newer client) is not part of the request.
func TestFingerprintIgnoresUnknownFields(t *testing.T) {
	m := &testpb.Order{Id: "o1", Amount: 5}
	before := fp(m)
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 99, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 7)
	m.ProtoReflect().SetUnknown(unknown)
	require.Equal(t, before, fp(m))
}

// TestFingerprintAny: an Any of a known type counts by its message, so two
// serializations of one message are one request; an unknown type by its
// bytes.
func TestFingerprintAny(t *testing.T) {
	inner := &testpb.Everything{Counts: map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}}
	det, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	require.NoError(t, err)
	// The same entries, another order: reversed field by field.
	var rev []byte
	for b := det; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		require.Positive(t, n)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		require.Positive(t, m)
		rev = append(append([]byte{}, b[:n+m]...), rev...)
		b = b[n+m:]
	}
	require.NotEqual(t, det, rev)
	url := "type.googleapis.com/idemgen.idemproto.test.v1.Everything"
	a := &testpb.Everything{Extra: &anypb.Any{TypeUrl: url, Value: det}}
	b := &testpb.Everything{Extra: &anypb.Any{TypeUrl: url, Value: rev}}
	assert.Equal(t, fp(a), fp(b))
	other := &testpb.Everything{Extra: &anypb.Any{TypeUrl: url, Value: append(det[:len(det):len(det)], rev[:4]...)}}
	assert.NotEqual(t, fp(a), fp(other))

	unknownURL := "type.googleapis.com/example.Unknown"
	c := &testpb.Everything{Extra: &anypb.Any{TypeUrl: unknownURL, Value: det}}
	d := &testpb.Everything{Extra: &anypb.Any{TypeUrl: unknownURL, Value: rev}}
	assert.NotEqual(t, fp(c), fp(d), "an unknown type counts by its bytes")
	assert.NotEqual(t, fp(a), fp(c), "the type URL counts")
}

// TestFingerprintCycle: a message that holds itself through Go pointers
// fingerprints (by its shape) instead of recursing forever.
func TestFingerprintCycle(t *testing.T) {
	a := &testpb.Inner{Name: "a"}
	a.Children = []*testpb.Inner{a}
	b := &testpb.Inner{Name: "a"}
	b.Children = []*testpb.Inner{{Name: "a", Children: []*testpb.Inner{b}}}
	assert.NotEqual(t, fp(a), fp(b))
	c := &testpb.Inner{Name: "a"}
	c.Children = []*testpb.Inner{c}
	assert.Equal(t, fp(a), fp(c))
	shared := &testpb.Inner{Name: "s"}
	assert.Equal(t, fp(&testpb.Inner{Children: []*testpb.Inner{shared, shared}}),
		fp(&testpb.Inner{Children: []*testpb.Inner{{Name: "s"}, {Name: "s"}}}), "a message met twice, not inside itself, is no cycle")
}

// TestFingerprintOmit: a field named in omit is left out of the message
// itself, not of the messages it holds.
func TestFingerprintOmit(t *testing.T) {
	f := func(m proto.Message, omit ...protoreflect.Name) []byte {
		fp := idem.NewFingerprinter("T.M")
		idemproto.Fingerprint(fp, m, omit...)
		return fp.Sum()
	}
	assert.Equal(t, f(&testpb.Order{Id: "a", Amount: 1}, "id"), f(&testpb.Order{Amount: 1}, "id"))
	assert.NotEqual(t, f(&testpb.Order{Id: "a", Amount: 1}), f(&testpb.Order{Amount: 1}))
	assert.NotEqual(t, f(&testpb.Inner{Children: []*testpb.Inner{{Name: "a"}}}, "name"), f(&testpb.Inner{Children: []*testpb.Inner{{}}}, "name"))
}

// TestFingerprintCompatibility holds the rules the package doc gives for
// changing a .proto while keys are kept.
func TestFingerprintCompatibility(t *testing.T) {
	v1 := fp(&testpb.Order{Id: "o1", Amount: 5, Note: "n"})
	assert.Equal(t, v1, fp(&testpb.OrderV2{OrderId: "o1", Amount: 5, Note: "n"}),
		"renamed message and field, int64 narrowed to int32, a field added and left unset: the same request")
	assert.NotEqual(t, v1, fp(&testpb.OrderV2{OrderId: "o1", Amount: 5, Note: "n", Coupon: "c"}), "the added field set")
	assert.NotEqual(t, v1, fp(&testpb.OrderV3{Id: "o1", Amount: 5, Note: "n"}), "renumbered field, int64 to uint64")
	assert.NotEqual(t, v1, fp(&testpb.OrderV3{Id: "o1", Note: "n"}), "and so with the moved field alone")
}

// TestCodec: a stored response decodes proto.Equal to what was stored,
// nil included, deterministically.
func TestCodec(t *testing.T) {
	for _, m := range append(random(2, 300), nil, &testpb.Everything{}) {
		b, err := idemproto.Encode(m)
		require.NoError(t, err)
		again, err := idemproto.Encode(copyOf(t, m))
		require.NoError(t, err)
		require.Equal(t, b, again, "the encoding is deterministic")
		got, err := idemproto.Decode[*testpb.Everything](b)
		require.NoError(t, err)
		require.True(t, idemproto.Equal(m, got), "stored %v, decoded %v", m, got)
		require.Equal(t, m == nil, got == nil)
	}
	m := &testpb.Order{Id: "o"}
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 99, protowire.BytesType)
	unknown = protowire.AppendString(unknown, "newer")
	m.ProtoReflect().SetUnknown(unknown)
	b, err := idemproto.Encode(m)
	require.NoError(t, err)
	got, err := idemproto.Decode[*testpb.Order](b)
	require.NoError(t, err)
	require.True(t, proto.Equal(m, got), "unknown fields replay too")
}

// TestCodecRefuses: what cannot be stored or read back is an error.
func TestCodecRefuses(t *testing.T) {
	_, err := idemproto.Encode(&testpb.Order{Id: "\xff"})
	require.ErrorContains(t, err, "idemproto: marshal idemgen.idemproto.test.v1.Order")
	for _, b := range [][]byte{nil, {0, 1}, {2}, {1, 0xff}} {
		_, err := idemproto.Decode[*testpb.Order](b)
		require.Error(t, err, "%x", b)
	}
	_, err = idemproto.Decode[proto.Message]([]byte{1})
	require.ErrorContains(t, err, "interface type")
}
