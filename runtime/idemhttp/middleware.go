package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// ScopeFunc returns the scope a request's idempotency key belongs to, usually
// the authenticated account or API client. Two requests with the same key in
// different scopes are different requests.
type ScopeFunc func(*http.Request) (string, error)

// Config configures the middleware. Exactly one of Scope and SingleTenant
// must be set: keys are per tenant, and sharing one key space between callers
// is a choice the service states, never a default. Otherwise the zero value
// is usable: keys are required on POST and PATCH and validated with
// idem.DefaultKeyPolicy.
type Config struct {
	// Policy validates keys. It should be the policy the idem.Store uses. The
	// zero value means idem.DefaultKeyPolicy (1 to 255 visible ASCII
	// characters); a policy without MaxLen gets DefaultKeyPolicy's MaxLen.
	Policy idem.KeyPolicy

	// Scope, if set, is called for every request that requires a key, before
	// the key is read; its result is stored with idem.ContextWithScope. An error, or
	// an empty scope (which would let every such caller share keys), is
	// refused with 403 Forbidden and a problem of type TypeScopeUnknown (not
	// 401: a 401 must carry a WWW-Authenticate challenge that only the
	// application knows; run authentication before this middleware). The error
	// is not shown to the client; set OnScopeError to log it or answer
	// differently.
	//
	// A scope the ledger cannot hold (not UTF-8, a NUL byte, longer than
	// idem.MaxScopeLen) is refused the same way, with the reason in the
	// problem's detail, before any database call.
	Scope ScopeFunc

	// SingleTenant, set instead of Scope, says that every caller shares one
	// key space: a key sent by one client replays the response another
	// client got with it. Set it only for a service with one tenant (one
	// caller, or callers that trust each other with their responses).
	SingleTenant bool

	// OnScopeError, if set, writes the response when Scope fails instead of
	// the default 403. err is Scope's error, or ErrEmptyScope.
	OnScopeError func(w http.ResponseWriter, r *http.Request, err error)

	// ProblemTypeBase, if set, replaces DefaultProblemTypeBase in the "type"
	// of every problem the middleware writes, and of those WriteError and
	// WriteProblem write for requests that went through it: a service that
	// documents its errors itself gets base+"mismatch", base+"in-progress" and
	// so on (the names of the Type constants). It must be a URI reference
	// (RFC 3986), usually absolute and ending in "#" or "/"; New panics on one
	// that does not parse.
	ProblemTypeBase string

	// Methods lists the request methods that require a key, compared exactly.
	// nil means POST and PATCH. Requests with other methods pass through
	// untouched: no key is read, no scope is set, no header is added.
	Methods []string
}

// ErrEmptyScope is passed to Config.OnScopeError when Config.Scope returned
// an empty scope without an error.
var ErrEmptyScope = errors.New("idemhttp: scope function returned an empty scope")

// ErrNoScope is the panic value of New when the Config sets neither Scope nor
// SingleTenant, or both.
var ErrNoScope = errors.New("idemhttp: New: set Config.Scope to the function that names each request's tenant, " +
	"or Config.SingleTenant if every caller may share one key space (and not both)")

// New returns middleware that, for requests whose method requires a key:
//
//   - resolves the scope with cfg.Scope (failure: 403, see Config.Scope);
//   - parses and validates the Idempotency-Key header with ParseKey (missing:
//     400 TypeMissingKey; malformed, repeated or too long: 400 TypeInvalidKey);
//   - calls the next handler with a context carrying the key (idem.ContextWithKey),
//     the scope (idem.ContextWithScope) and an idem.Outcome (idem.ContextWithOutcome),
//     marked a possible retry (idem.ContextWithRetry) when the request says it
//     is one (HeaderPreviousAttempts above 0, which Transport sets);
//   - adds Idempotent-Replayed: true to the response if the idempotent call
//     the handler made with that context replayed a stored response, and
//     Idempotency-Key-Retention (HeaderRetention) with the called method's
//     retention window in seconds once the handler made such a call.
//
// The header is added when the handler first writes the status, the body or
// flushes, so the handler must make its idempotent call before writing. The
// ResponseWriter the handler gets implements http.Flusher and Unwrap, so
// http.ResponseController reaches the underlying writer's other features
// (Hijack, deadlines, full duplex).
//
// New panics with ErrNoScope unless exactly one of cfg.Scope and
// cfg.SingleTenant is set: like http.ServeMux's refusal of a duplicate
// pattern, it is a wiring mistake that must stop the server at start-up, not
// a condition to handle.
func New(cfg Config) func(http.Handler) http.Handler {
	if (cfg.Scope == nil) == !cfg.SingleTenant {
		panic(ErrNoScope)
	}
	if _, err := url.Parse(cfg.ProblemTypeBase); err != nil {
		panic(fmt.Errorf("idemhttp: New: Config.ProblemTypeBase: %w", err))
	}
	base := cfg.ProblemTypeBase
	policy := cfg.Policy
	if policy == (idem.KeyPolicy{}) {
		policy = idem.DefaultKeyPolicy
	}
	policy = bounded(policy)
	methods := slices.Clone(cfg.Methods)
	if methods == nil {
		methods = []string{http.MethodPost, http.MethodPatch}
	}
	scopeFn := cfg.Scope
	onScopeError := cfg.OnScopeError
	if onScopeError == nil {
		onScopeError = writeScopeError
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(methods, r.Method) {
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			if base != "" {
				ctx = context.WithValue(ctx, problemBaseCtx{}, base)
				r = r.WithContext(ctx)
			}
			if scopeFn != nil {
				scope, err := scopeFn(r)
				if err == nil && scope == "" {
					err = ErrEmptyScope
				}
				if err == nil {
					err = idem.ValidateScope(scope)
				}
				if err != nil {
					onScopeError(w, r, err)
					return
				}
				ctx = idem.ContextWithScope(ctx, scope)
			}
			key, err := ParseKey(r.Header.Values(HeaderKey), policy)
			if err != nil {
				WriteError(w, r, err)
				return
			}
			ctx = idem.ContextWithKey(ctx, key)
			if retried(r.Header.Values(HeaderPreviousAttempts)) {
				ctx = idem.ContextWithRetry(ctx)
			}
			ctx, outcome := idem.ContextWithOutcome(ctx)
			rw := &responseWriter{ResponseWriter: w, replayed: outcome.Replayed, retention: outcome.Retention}
			next.ServeHTTP(rw, r.WithContext(ctx))
			rw.finish()
		})
	}
}

// writeScopeError is the default Config.OnScopeError: WriteError's 403 for
// a scope idem.ValidateScope refused, the same problem with another detail
// for a Scope function that failed or named no scope.
func writeScopeError(w http.ResponseWriter, r *http.Request, err error) {
	if idem.Classify(err).Kind == idem.KindInvalidScope {
		WriteError(w, r, err)
		return
	}
	WriteProblem(w, r, Problem{
		Type:   TypeScopeUnknown,
		Title:  "Request scope unknown",
		Status: http.StatusForbidden,
		Detail: "The account this request belongs to could not be determined, so its Idempotency-Key cannot be applied. " +
			"Check the request's credentials.",
	})
}

// responseWriter adds Idempotent-Replayed: true (if the idempotent call
// replayed) and Idempotency-Key-Retention (once a call was made) before the
// final status is written.
type responseWriter struct {
	http.ResponseWriter
	replayed    func() bool
	retention   func() time.Duration // nil: none advertised
	wroteHeader bool                 // the final (non-1xx) status has been written
}

// stamp sets the headers once, just before the final status goes out.
func (w *responseWriter) stamp() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.retention != nil {
		if d := w.retention(); d > 0 {
			w.ResponseWriter.Header().Set(HeaderRetention, strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
		}
	}
	if w.replayed() {
		w.ResponseWriter.Header().Set(HeaderReplayed, "true")
	}
}

// WriteHeader implements http.ResponseWriter. Informational (1xx) statuses
// other than 101 pass through without ending the header phase.
func (w *responseWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.stamp()
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *responseWriter) Write(b []byte) (int, error) {
	w.stamp()
	return w.ResponseWriter.Write(b)
}

// ReadFrom implements io.ReaderFrom so io.Copy keeps the underlying writer's
// fast path (sendfile).
func (w *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	w.stamp()
	return io.Copy(w.ResponseWriter, src)
}

// FlushError flushes the underlying writer; http.ResponseController uses it.
// It returns an error matching http.ErrNotSupported if the writer cannot flush.
func (w *responseWriter) FlushError() error {
	w.stamp()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush implements http.Flusher. It does nothing if the underlying writer
// cannot flush.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish runs after the handler returns. If it wrote nothing, net/http sends
// the status and headers now, so the replay header is set in time.
func (w *responseWriter) finish() { w.stamp() }
