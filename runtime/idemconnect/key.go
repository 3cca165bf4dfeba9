package idemconnect

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemgen/idemgen/runtime/idem"
)

// RequestIDField is the name of the AIP-155 request identifier field: a
// string field of the request message holding the request's key, in the
// format HandlerConfig.RequestID requires.
const RequestIDField = idem.RequestIDField

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
