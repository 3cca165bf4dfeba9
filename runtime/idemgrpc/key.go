package idemgrpc

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemgen/idemgen/runtime/idem"
)

// DefaultMetadataKey is the metadata key that carries the idempotency key
// unless ServerConfig.MetadataKey or ClientConfig.MetadataKey says otherwise.
// gRPC metadata keys are lower case.
const DefaultMetadataKey = "idempotency-key"

// MetadataReplayed is the response header metadata key set to "true" when
// the response is a replay of a stored one.
const MetadataReplayed = "idempotent-replayed"

// MetadataRetention is the response header metadata key that carries the
// retention window of the called method in whole seconds, rounded up,
// counted from the first request sent with the key, as
// idemhttp.HeaderRetention does over HTTP.
const MetadataRetention = "idempotency-key-retention"

// RequestIDField is the name of the AIP-155 request identifier field: a
// string field of the request message holding a UUID4.
const RequestIDField = "request_id"

// keyFromMetadata returns the key sent as the metadata values vals (nil if
// none was sent), validated with p.
func keyFromMetadata(name string, vals []string, p idem.KeyPolicy) (string, error) {
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", keyErr("metadata %s is sent %d times; send it exactly once", name, len(vals))
	}
	key := strings.Trim(vals[0], " \t")
	if err := p.Validate(key); err != nil {
		return "", fmt.Errorf("idemgrpc: metadata %s: %w", name, err)
	}
	return key, nil
}

// RequestID returns the AIP-155 request_id of msg: the value of its string
// field named request_id, or "" when msg has no such field or it is empty.
// ok is false when the field is set but is not a UUID4 (the nil UUID
// included); the value is then not returned.
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
// UUID is not one (its version is 0), nor is the max UUID.
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
		if !isHex(c) {
			return false
		}
	}
	return s[14] == '4' && strings.IndexByte("89abAB", s[19]) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func keyErr(format string, args ...any) error {
	return fmt.Errorf("idemgrpc: %w", &idem.KeyError{Reason: fmt.Sprintf(format, args...)})
}

// errBadRequestID is the error for a request_id that is not a UUID4.
func errBadRequestID() error {
	return keyErr("field %s is not a UUID4 (36 characters, version 4, the nil UUID refused), as AIP-155 requires", RequestIDField)
}
