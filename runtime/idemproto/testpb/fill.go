package testpb

import (
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Fill sets a random subset of m's fields to random values, nested
// messages to a depth of three: each field is left unset or set (to its
// zero value now and then, so that presence is exercised), one member of
// each oneof at most, and an Any to a random Inner.
func Fill(m proto.Message, rnd *rand.Rand) {
	fill(m.ProtoReflect(), rnd, 0)
}

func fill(r protoreflect.Message, rnd *rand.Rand, depth int) {
	if r.Descriptor().FullName() == "google.protobuf.Any" {
		in := &Inner{}
		fill(in.ProtoReflect(), rnd, depth+1)
		a, err := anypb.New(in)
		if err != nil {
			panic(err) // a valid Inner always marshals
		}
		proto.Merge(r.Interface(), a)
		return
	}
	fds := r.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if rnd.IntN(2) == 0 {
			continue
		}
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && r.WhichOneof(o) != nil {
			continue
		}
		kind := fd.Kind()
		if (kind == protoreflect.MessageKind || kind == protoreflect.GroupKind) && depth >= 3 {
			continue
		}
		switch {
		case fd.IsList():
			l := r.Mutable(fd).List()
			for range rnd.IntN(4) {
				if kind == protoreflect.MessageKind {
					v := l.NewElement()
					fill(v.Message(), rnd, depth+1)
					l.Append(v)
					continue
				}
				l.Append(scalar(fd, rnd))
			}
			if l.Len() == 0 {
				r.Clear(fd)
			}
		case fd.IsMap():
			mp := r.Mutable(fd).Map()
			for range rnd.IntN(4) {
				k := scalar(fd.MapKey(), rnd).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					fill(v.Message(), rnd, depth+1)
					mp.Set(k, v)
					continue
				}
				mp.Set(k, scalar(fd.MapValue(), rnd))
			}
			if mp.Len() == 0 {
				r.Clear(fd)
			}
		case kind == protoreflect.MessageKind:
			fill(r.Mutable(fd).Message(), rnd, depth+1)
		default:
			r.Set(fd, scalar(fd, rnd))
		}
	}
}

// scalar is a random value of fd's kind, its zero value one time in four.
func scalar(fd protoreflect.FieldDescriptor, rnd *rand.Rand) protoreflect.Value {
	zero := rnd.IntN(4) == 0
	n := rnd.Int64N(5) - 2
	if !zero && rnd.IntN(3) == 0 {
		n = int64(rnd.Uint64())
	}
	if zero {
		n = 0
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(n%2 != 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values() // defined values: JSON writes every google.protobuf.NullValue as null
		if zero {
			return protoreflect.ValueOfEnum(0)
		}
		return protoreflect.ValueOfEnum(vals.Get(rnd.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(floatOf(n, rnd)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(floatOf(n, rnd))
	case protoreflect.StringKind:
		if zero {
			return protoreflect.ValueOfString("")
		}
		return protoreflect.ValueOfString(string([]rune{'a' + rune(rnd.IntN(3)), 'é', rune('0' + rnd.IntN(3))}[:1+rnd.IntN(3)]))
	case protoreflect.BytesKind:
		if zero {
			return protoreflect.ValueOfBytes(nil)
		}
		return protoreflect.ValueOfBytes([]byte{byte(n), 0, byte(rnd.IntN(3))}[:1+rnd.IntN(3)])
	}
	panic("testpb: no random value for kind " + fd.Kind().String())
}

// floatOf is a float with the special values now and then.
func floatOf(n int64, rnd *rand.Rand) float64 {
	switch rnd.IntN(8) {
	case 0:
		return math.NaN()
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return math.Inf(1)
	}
	return float64(n) / 2
}
