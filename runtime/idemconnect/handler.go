package idemconnect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemrpc"
)

// Header names, the same as runtime/idemhttp's: over the gRPC protocol they
// travel as the lower-case metadata keys runtime/idemgrpc uses.
const (
	HeaderKey       = idemhttp.HeaderKey
	HeaderReplayed  = idemhttp.HeaderReplayed
	HeaderRetention = idemhttp.HeaderRetention
	// HeaderPreviousAttempts is set by the client interceptor on its
	// retries; the handler interceptor marks a request whose value is
	// above 0, or whose grpc-previous-rpc-attempts is (grpc-go's own
	// retries, over the gRPC protocol), a possible retry
	// (idem.ContextWithRetry): the idempotent call looks its key up
	// before its body runs. It changes what the call costs, never what
	// it answers.
	HeaderPreviousAttempts = idemhttp.HeaderPreviousAttempts
)

// retried reports whether h says the request is a retry.
func retried(h http.Header) bool {
	for _, k := range []string{HeaderPreviousAttempts, "Grpc-Previous-Rpc-Attempts"} {
		for _, v := range h.Values(k) {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
				return true
			}
		}
	}
	return false
}

// ScopeFunc returns the scope a request's idempotency key belongs to, usually
// the authenticated account, read from the request's headers or from what
// an authentication interceptor that ran before put in ctx.
type ScopeFunc func(ctx context.Context, req connect.AnyRequest) (string, error)

// HandlerConfig configures NewHandlerInterceptor. Exactly one of Scope and
// SingleTenant must be set, as for idemhttp.Config.
type HandlerConfig struct {
	// Policy validates keys; the zero value means idem.DefaultKeyPolicy.
	Policy idem.KeyPolicy
	// Scope, if set, is called for every request that carries a key; its
	// result is stored with idem.ContextWithScope. An error or an empty
	// scope is answered with CodePermissionDenied, without showing the error.
	Scope ScopeFunc
	// SingleTenant, set instead of Scope, says that every caller shares one
	// key space.
	SingleTenant bool
	// RequestID is the format this handler requires of an AIP-155
	// request_id field; the zero value, idem.RequestIDUUID4, is the UUID4
	// AIP-155 asks for. A service that documents another format sets
	// idem.RequestIDUUID (any UUID version, e.g. UUIDv7) or idem.RequestIDKey
	// (any key Policy accepts, as sent). A request_id in another format is
	// refused with CodeInvalidArgument and a message naming this format.
	RequestID idem.RequestIDFormat
}

// ErrNoScope is the panic value of NewHandlerInterceptor when the
// HandlerConfig sets neither Scope nor SingleTenant, or both.
var ErrNoScope = errors.New("idemconnect: NewHandlerInterceptor: set HandlerConfig.Scope to the function that names each request's tenant, " +
	"or HandlerConfig.SingleTenant if every caller may share one key space (and not both)")

// NewHandlerInterceptor returns the handler interceptor the package doc
// describes. It panics with ErrNoScope unless exactly one of cfg.Scope and
// cfg.SingleTenant is set, and with the error of cfg.RequestID.Check for an
// unknown request_id format.
func NewHandlerInterceptor(cfg HandlerConfig) connect.Interceptor {
	if (cfg.Scope == nil) == !cfg.SingleTenant {
		panic(ErrNoScope)
	}
	if err := cfg.RequestID.Check(); err != nil {
		panic(err)
	}
	if cfg.Policy == (idem.KeyPolicy{}) {
		cfg.Policy = idem.DefaultKeyPolicy
	}
	return &handler{cfg: cfg}
}

type handler struct{ cfg HandlerConfig }

// WrapUnary implements connect.Interceptor.
func (h *handler) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient || req.Spec().IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return next(ctx, req)
		}
		key, err := h.key(req)
		if err != nil {
			return nil, Error(err)
		}
		if key == "" {
			// The generated wrapper refuses the call with idem.ErrNoKey.
			resp, err := next(ctx, req)
			return resp, Error(err)
		}
		if h.cfg.Scope != nil {
			scope, err := h.cfg.Scope(ctx, req)
			if err == nil && scope == "" {
				err = errors.New("empty scope")
			}
			if err != nil {
				return nil, mapping(idemrpc.ScopeUnknown("request")).error()
			}
			if err := idem.ValidateScope(scope); err != nil {
				return nil, Error(err)
			}
			ctx = idem.ContextWithScope(ctx, scope)
		}
		ctx = idem.ContextWithKey(ctx, key)
		if retried(req.Header()) {
			ctx = idem.ContextWithRetry(ctx)
		}
		ctx, outcome := idem.ContextWithOutcome(ctx)
		resp, err := next(ctx, req)
		err = Error(err)
		stamp(resp, err, outcome)
		return resp, err
	}
}

// key returns the request's key: its AIP-155 request_id if it has one (in
// the format cfg.RequestID requires), else the Idempotency-Key header (bare
// or as a Structured Field string, as idemhttp.ParseKey reads it), else "".
// Both may be sent only when they agree.
func (h *handler) key(req connect.AnyRequest) (string, error) {
	var fromHeader string
	if vals := req.Header().Values(HeaderKey); len(vals) > 0 {
		var err error
		if fromHeader, err = idemhttp.ParseKey(vals, h.cfg.Policy); err != nil {
			return "", err
		}
	}
	key, err := h.cfg.RequestID.RequestKey(fromHeader, "the "+HeaderKey+" header", requestID(req.Any()), h.cfg.Policy)
	if err != nil {
		return "", fmt.Errorf("idemconnect: %w", err)
	}
	return key, nil
}

// stamp adds the replay and retention headers to the response, or to the
// error's metadata.
func stamp(resp connect.AnyResponse, err error, o *idem.Outcome) {
	var header interface{ Set(k, v string) }
	var ce *connect.Error
	switch {
	case err == nil && resp != nil:
		header = resp.Header()
	case errors.As(err, &ce):
		header = ce.Meta()
	default:
		return
	}
	if d := o.Retention(); d > 0 {
		header.Set(HeaderRetention, strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	if o.Replayed() {
		header.Set(HeaderReplayed, "true")
	}
}

// WrapStreamingClient implements connect.Interceptor: streams pass through.
func (h *handler) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: streams pass through.
func (h *handler) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
