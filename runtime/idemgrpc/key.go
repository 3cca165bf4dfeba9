package idemgrpc

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemgen/idemgen/runtime/idem"
)

// PreviousAttemptsMetadataKey is the metadata key UnaryClientInterceptor
// sends on its own retries: how many attempts of the call it made before
// this one. grpc-go's retries (a service config's retryPolicy) send
// grpc-previous-rpc-attempts inside each of them. The server interceptor
// marks a call carrying either above 0 as a possible retry
// (idem.ContextWithRetry): the idempotent call looks its key up before its
// body runs, which costs a stored answer one round trip instead of a run
// of the body that is rolled back. A wrong or missing value changes what
// the call costs, never what it answers.
const PreviousAttemptsMetadataKey = "idempotency-previous-attempts"

// grpcPreviousAttempts is the metadata key of grpc-go's own retries.
const grpcPreviousAttempts = "grpc-previous-rpc-attempts"

// withPreviousAttempts returns ctx with PreviousAttemptsMetadataKey set to
// n in its outgoing metadata (ctx itself for n = 0).
func withPreviousAttempts(ctx context.Context, n int) context.Context {
	if n < 1 {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(PreviousAttemptsMetadataKey, strconv.Itoa(n))
	return metadata.NewOutgoingContext(ctx, md)
}

// retried reports whether the incoming metadata md says the call is a
// retry: grpc-previous-rpc-attempts or PreviousAttemptsMetadataKey above 0.
func retried(md metadata.MD) bool {
	for _, k := range []string{grpcPreviousAttempts, PreviousAttemptsMetadataKey} {
		for _, v := range md.Get(k) {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
				return true
			}
		}
	}
	return false
}

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
