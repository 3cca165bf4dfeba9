package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemrpc"
)

// ScopeFunc returns the scope a call's idempotency key belongs to, usually
// the authenticated account or API client, read from ctx (its incoming
// metadata, its peer's credentials, or what an authentication interceptor
// that ran before put there). Two calls with the same key in different
// scopes are different calls.
type ScopeFunc func(ctx context.Context, fullMethod string) (string, error)

// ServerConfig configures UnaryServerInterceptor. Exactly one of Scope and
// SingleTenant must be set, as for idemhttp.Config.
type ServerConfig struct {
	// Policy validates keys sent in metadata; the zero value means
	// idem.DefaultKeyPolicy. It should be the policy the idem.Store uses.
	Policy idem.KeyPolicy

	// MetadataKey is the metadata key that carries the idempotency key; ""
	// means DefaultMetadataKey. It is compared in lower case.
	MetadataKey string

	// RequestID is the format this server requires of an AIP-155
	// request_id field; the zero value, idem.RequestIDUUID4, is the UUID4
	// AIP-155 asks for. A service that documents another format sets
	// idem.RequestIDUUID (any UUID version, e.g. UUIDv7) or idem.RequestIDKey
	// (any key Policy accepts, as sent). A request_id in another format is
	// refused with InvalidArgument and a message naming this format.
	RequestID idem.RequestIDFormat

	// Scope, if set, is called for every call that carries a key; its result
	// is stored with idem.ContextWithScope. An error or an empty scope is
	// answered with codes.PermissionDenied, without showing the error.
	Scope ScopeFunc

	// SingleTenant, set instead of Scope, says that every caller shares one
	// key space: a key sent by one client replays the response another
	// client got with it.
	SingleTenant bool
}

// ErrNoScope is the panic value of UnaryServerInterceptor when the
// ServerConfig sets neither Scope nor SingleTenant, or both.
var ErrNoScope = errors.New("idemgrpc: UnaryServerInterceptor: set ServerConfig.Scope to the function that names each call's tenant, " +
	"or ServerConfig.SingleTenant if every caller may share one key space (and not both)")

// ErrEmptyScope is the error a ScopeFunc's empty result stands for.
var ErrEmptyScope = errors.New("idemgrpc: scope function returned an empty scope")

// UnaryServerInterceptor returns the server interceptor the package doc
// describes. It panics with ErrNoScope unless exactly one of cfg.Scope and
// cfg.SingleTenant is set, and with the error of cfg.RequestID.Check for an
// unknown request_id format: wiring mistakes that must stop the server at
// start-up.
func UnaryServerInterceptor(cfg ServerConfig) grpc.UnaryServerInterceptor {
	if (cfg.Scope == nil) == !cfg.SingleTenant {
		panic(ErrNoScope)
	}
	if err := cfg.RequestID.Check(); err != nil {
		panic(err)
	}
	s := &server{cfg: cfg, mdKey: strings.ToLower(cfg.MetadataKey), policy: cfg.Policy}
	if s.mdKey == "" {
		s.mdKey = DefaultMetadataKey
	}
	if s.policy == (idem.KeyPolicy{}) {
		s.policy = idem.DefaultKeyPolicy
	}
	if s.policy.MaxLen <= 0 {
		s.policy.MaxLen = idem.DefaultKeyPolicy.MaxLen
	}
	return s.intercept
}

type server struct {
	cfg    ServerConfig
	mdKey  string
	policy idem.KeyPolicy
	reads  readOnly
}

func (s *server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.reads.is(info.FullMethod) {
		return handler(ctx, req)
	}
	key, err := s.key(ctx, req)
	if err != nil {
		return nil, Error(err)
	}
	if key == "" {
		// No key: the call goes on without one. An idempotent method the
		// handler calls answers idem.ErrNoKey (InvalidArgument); any other
		// method is not concerned.
		resp, err := handler(ctx, req)
		return resp, Error(err)
	}
	if s.cfg.Scope != nil {
		scope, err := s.cfg.Scope(ctx, info.FullMethod)
		if err == nil && scope == "" {
			err = ErrEmptyScope
		}
		if err != nil {
			return nil, mapping(idemrpc.ScopeUnknown("call")).status().Err()
		}
		if err := idem.ValidateScope(scope); err != nil {
			return nil, Error(err)
		}
		ctx = idem.ContextWithScope(ctx, scope)
	}
	ctx = idem.ContextWithKey(ctx, key)
	if md, _ := metadata.FromIncomingContext(ctx); retried(md) {
		ctx = idem.ContextWithRetry(ctx)
	}
	ctx, outcome := idem.ContextWithOutcome(ctx)
	resp, err := handler(ctx, req)
	setHeader(ctx, outcome)
	return resp, Error(err)
}

// key returns the call's key: the AIP-155 request_id of req if it has one
// (in the format cfg.RequestID requires), else the metadata key, else "".
// Both may be sent only when they agree.
func (s *server) key(ctx context.Context, req any) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	fromMD, err := keyFromMetadata(s.mdKey, md.Get(s.mdKey), s.policy)
	if err != nil {
		return "", err
	}
	key, err := s.cfg.RequestID.RequestKey(fromMD, "metadata "+s.mdKey, requestID(req), s.policy)
	if err != nil {
		return "", fmt.Errorf("idemgrpc: %w", err)
	}
	return key, nil
}

// setHeader adds the replay and retention metadata after an idempotent call.
func setHeader(ctx context.Context, o *idem.Outcome) {
	md := metadata.MD{}
	if d := o.Retention(); d > 0 {
		md.Set(MetadataRetention, strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	if o.Replayed() {
		md.Set(MetadataReplayed, "true")
	}
	if md.Len() > 0 {
		// Fails only when the handler already sent the header itself.
		_ = grpc.SetHeader(ctx, md)
	}
}

// readOnly remembers which methods are declared
// option idempotency_level = NO_SIDE_EFFECTS in their service's proto, as
// registered in protoregistry.GlobalFiles.
type readOnly struct{ m sync.Map } // full method → bool

func (r *readOnly) is(fullMethod string) bool {
	if v, ok := r.m.Load(fullMethod); ok {
		return v.(bool)
	}
	v := NoSideEffects(fullMethod)
	r.m.Store(fullMethod, v)
	return v
}

// NoSideEffects reports whether the method named by fullMethod
// ("/package.Service/Method") is declared with
// option idempotency_level = NO_SIDE_EFFECTS in a proto file registered in
// protoregistry.GlobalFiles (generated code registers its files when
// imported).
func NoSideEffects(fullMethod string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return false
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	return ok && opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}
