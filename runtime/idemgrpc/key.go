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
// string field of the request message holding the call's key, in the format
// ServerConfig.RequestID requires.
const RequestIDField = idem.RequestIDField

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

// requestID returns the value of the AIP-155 request_id field of msg, read
// with protoreflect: "" when msg is not a proto message, has no string field
// of that name, or leaves it empty.
func requestID(msg any) string {
	if m, ok := msg.(proto.Message); ok && m != nil {
		r := m.ProtoReflect()
		if fd := r.Descriptor().Fields().ByName(RequestIDField); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() {
			return r.Get(fd).String()
		}
	}
	return ""
}

func keyErr(format string, args ...any) error {
	return fmt.Errorf("idemgrpc: %w", &idem.KeyError{Reason: fmt.Sprintf(format, args...)})
}
