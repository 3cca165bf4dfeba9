package idemproto

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// The first byte of a stored response.
const (
	markNil     = 0 // a nil message; nothing follows
	markMessage = 1 // the message's deterministic binary form follows
)

// Encode stores a response message: a marker byte, then, unless m is nil,
// its deterministic binary form. Generated method descriptions use it as
// idem.Method.Encode.
func Encode[M proto.Message](m M) ([]byte, error) {
	if any(m) == nil || !m.ProtoReflect().IsValid() {
		return []byte{markNil}, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend([]byte{markMessage}, m)
	if err != nil {
		return nil, fmt.Errorf("idemproto: marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// Decode reads back a response Encode stored: a nil M, or a new message
// with the stored fields (unknown ones included). Generated method
// descriptions use it as idem.Method.Decode.
func Decode[M proto.Message](b []byte) (M, error) {
	var zero M
	if len(b) == 0 {
		return zero, errors.New("idemproto: the stored response is empty, not a message Encode wrote")
	}
	switch b[0] {
	case markNil:
		if len(b) != 1 {
			return zero, fmt.Errorf("idemproto: the stored nil response has %d trailing bytes", len(b)-1)
		}
		return zero, nil
	case markMessage:
		if any(zero) == nil {
			return zero, errors.New("idemproto: cannot decode into an interface type; use the message's pointer type")
		}
		m, ok := zero.ProtoReflect().New().Interface().(M)
		if !ok {
			return zero, fmt.Errorf("idemproto: %T does not make messages of its own type", zero)
		}
		if err := proto.Unmarshal(b[1:], m); err != nil {
			return zero, fmt.Errorf("idemproto: unmarshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
		return m, nil
	}
	return zero, fmt.Errorf("idemproto: the stored response starts with %#x, not a marker Encode writes", b[0])
}

// Equal reports whether two messages are equal as proto.Equal says: the
// comparison of responses the generated tests use for a method that
// returns a message.
func Equal[M proto.Message](a, b M) bool { return proto.Equal(a, b) }
