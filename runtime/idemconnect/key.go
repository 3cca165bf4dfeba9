package idemconnect

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemgen/idemgen/runtime/idem"
)

// RequestIDField is the name of the AIP-155 request identifier field: a
// string field of the request message holding a UUID4.
const RequestIDField = "request_id"

// RequestID returns the AIP-155 request_id of msg: the value of its string
// field named request_id, in lower case, or "" when msg has no such field or
// it is empty. ok is false when the field is set but is not a UUID4 (the nil
// UUID included).
func RequestID(msg any) (id string, ok bool) {
	m, isProto := msg.(proto.Message)
	if !isProto || m == nil {
		return "", true
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(RequestIDField)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() || fd.IsMap() {
		return "", true
	}
	v := r.Get(fd).String()
	if v == "" {
		return "", true
	}
	if !IsUUID4(v) {
		return "", false
	}
	return strings.ToLower(v), true
}

// IsUUID4 reports whether s is a UUID of version 4 (RFC 9562) in its
// canonical 36-character textual form, in either case:
// xxxxxxxx-xxxx-4xxx-Yxxx-xxxxxxxxxxxx with Y one of 8, 9, a, b. The nil
// UUID is not one (its version is 0).
func IsUUID4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s[14] == '4' && strings.IndexByte("89abAB", s[19]) >= 0
}

func keyErr(format string, args ...any) error {
	return fmt.Errorf("idemconnect: %w", &idem.KeyError{Reason: fmt.Sprintf(format, args...)})
}
