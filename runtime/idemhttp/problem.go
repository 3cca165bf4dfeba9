package idemhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// DefaultProblemTypeBase is the prefix of the problem type URIs below. Each
// resolves to a section of this package's README that explains the problem
// and what a client should do about it. A service that documents the problems
// itself sets Config.ProblemTypeBase instead: the middleware and WriteError
// then write that base followed by the same names (missing-key, mismatch, ...).
const DefaultProblemTypeBase = "https://github.com/idemgen/idemgen/blob/main/runtime/idemhttp/README.md#"

// Problem type URIs, the "type" member of the problem details this package
// writes when Config.ProblemTypeBase is not set. Clients can compare against
// them.
const (
	TypeMissingKey       = DefaultProblemTypeBase + "missing-key"       // 400
	TypeInvalidKey       = DefaultProblemTypeBase + "invalid-key"       // 400
	TypeScopeUnknown     = DefaultProblemTypeBase + "scope-unknown"     // 403
	TypeMismatch         = DefaultProblemTypeBase + "mismatch"          // 422
	TypeInProgress       = DefaultProblemTypeBase + "in-progress"       // 409
	TypeLockLost         = DefaultProblemTypeBase + "lock-lost"         // 409
	TypeStoreUnavailable = DefaultProblemTypeBase + "store-unavailable" // 503
	TypeOutcomeUnknown   = DefaultProblemTypeBase + "outcome-unknown"   // 500
)

// problemBaseCtx is the context key of the problem type base the middleware
// hands to WriteProblem through the request.
type problemBaseCtx struct{}

// problemType rewrites a type under DefaultProblemTypeBase to the base the
// middleware put in r's context, if any.
func problemType(r *http.Request, typ string) string {
	if r == nil {
		return typ
	}
	base, ok := r.Context().Value(problemBaseCtx{}).(string)
	if !ok || !strings.HasPrefix(typ, DefaultProblemTypeBase) {
		return typ
	}
	return base + strings.TrimPrefix(typ, DefaultProblemTypeBase)
}

// ContentTypeProblem is the media type of RFC 9457 problem details in JSON.
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type     string `json:"type"`               // a URI naming the kind of problem
	Title    string `json:"title"`              // a short, fixed summary of the kind
	Status   int    `json:"status"`             // the HTTP status code
	Detail   string `json:"detail,omitempty"`   // what went wrong this time and what to do
	Instance string `json:"instance,omitempty"` // the request path
}

// WriteProblem writes p as application/problem+json with p.Status. An empty
// p.Instance is set to r's escaped path (r may be nil). A p.Type under
// DefaultProblemTypeBase is written under the middleware's
// Config.ProblemTypeBase when r went through a middleware that sets one. The
// response is marked not cacheable.
func WriteProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	p.Type = problemType(r, p.Type)
	if p.Instance == "" && r != nil && r.URL != nil {
		p.Instance = r.URL.EscapedPath()
	}
	body, err := json.Marshal(p)
	if err != nil { // unreachable: Problem holds only strings and an int
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	// A failed write means the client has gone; there is no one left to tell.
	_, _ = w.Write(append(body, '\n'))
}

// WriteError writes the problem details response for an error returned by an
// idempotent call (or by ParseKey) and reports whether it did:
//
//	idem.ErrMismatch     422 Unprocessable Content
//	idem.ErrInProgress   409 Conflict, Retry-After: RetryAfter in whole seconds, rounded up, at least 1
//	idem.ErrLockLost     409 Conflict, Retry-After: 1
//	idem.ErrInvalidKey   400 Bad Request
//	idem.ErrNoKey        400 Bad Request
//	idem.ErrInvalidScope 403 Forbidden
//	idem.ErrStore        503 Service Unavailable
//	idem.ErrOutcomeNotRecorded  500 Internal Server Error (no Retry-After)
//
// ErrOutcomeNotRecorded means the call ran but its outcome is unknown, and
// every retry of the key replays that answer: it is not an invitation to
// retry. When storing it failed too (ErrStore holds as well) the key frees
// itself when its lock expires, and the answer is 503.
//
// For any other error it writes nothing and returns false, so the handler can
// write its own response:
//
//	receipt, err := payments.Charge(r.Context(), req)
//	if idemhttp.WriteError(w, r, err) {
//		return
//	}
//	if err != nil { ... the application's own errors ... }
//
// WriteError must be called before anything else is written to w. The
// details name the problem but never echo the key, the fingerprints or the
// underlying database error.
func WriteError(w http.ResponseWriter, r *http.Request, err error) bool {
	c := idem.Classify(err)
	p, ok := problems[c.Kind]
	if !ok {
		return false
	}
	var wait, reason string
	if c.RetryAfter > 0 {
		secs := retryAfterSeconds(c.RetryAfter)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		wait = fmt.Sprintf("%d %s", secs, plural(secs, "second"))
	}
	if c.Reason != "" {
		reason = ": " + c.Reason
	}
	p.Detail = strings.NewReplacer("{wait}", wait, "{reason}", reason).Replace(p.Detail)
	WriteProblem(w, r, p)
	return true
}

// problems is WriteError's answer to each kind of idem.Classify; a kind not
// listed is the application's. In a Detail, {wait} stands for the
// Retry-After delay ("3 seconds") and {reason} for ": " and the key's or
// scope's reason, or nothing.
var problems = map[idem.Kind]Problem{
	idem.KindMismatch: {Type: TypeMismatch, Title: "Idempotency-Key is already used", Status: http.StatusUnprocessableEntity,
		Detail: "This Idempotency-Key was already used with a different request. " +
			"Send a new key for a new request; resend the original request unchanged to get its response."},
	idem.KindInProgress: {Type: TypeInProgress, Title: "A request is outstanding for this Idempotency-Key", Status: http.StatusConflict,
		Detail: "A request with this Idempotency-Key is still being processed. " +
			"Retry in {wait} with the same key and request to get its response."},
	idem.KindLockLost: {Type: TypeLockLost, Title: "Idempotent request taken over", Status: http.StatusConflict,
		Detail: "This attempt ran longer than its lock on the Idempotency-Key and another attempt took the request over. " +
			"Retry with the same key and request to get the result of the attempt that completes."},
	idem.KindInvalidKey: {Type: TypeInvalidKey, Title: "Idempotency-Key is invalid", Status: http.StatusBadRequest,
		Detail: "The Idempotency-Key header is malformed{reason}. " +
			`Send the header once, with a key of visible ASCII characters, bare (abc) or quoted ("abc").`},
	idem.KindNoKey: {Type: TypeMissingKey, Title: "Idempotency-Key is missing", Status: http.StatusBadRequest,
		Detail: "This operation is idempotent and requires an Idempotency-Key header. " +
			"Send a new unique key (for example a UUID) with each new request, and the same key when retrying it."},
	idem.KindInvalidScope: {Type: TypeScopeUnknown, Title: "Request scope unknown", Status: http.StatusForbidden,
		Detail: "The account this request belongs to cannot scope an Idempotency-Key{reason}. Check the request's credentials."},
	idem.KindOutcomeUnknown: {Type: TypeOutcomeUnknown, Title: "Outcome of the idempotent request is unknown", Status: http.StatusInternalServerError,
		Detail: "The request was processed, but its outcome could not be recorded, so it is not known whether it took effect. " +
			"Retrying with this Idempotency-Key returns this answer again; do not send the request under a new key " +
			"until the outcome has been checked (ask the service's operator)."},
	idem.KindStoreUnavailable: {Type: TypeStoreUnavailable, Title: "Idempotency ledger unavailable", Status: http.StatusServiceUnavailable,
		Detail: "The record of idempotent requests could not be reached, so this request was not processed or its outcome was not recorded. " +
			"Retry later with the same Idempotency-Key and request."},
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	secs := int64(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	return max(secs, 1)
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
