// Package idemrpc is how gRPC and Connect answer each kind of error of an
// idempotent call ([idem.Classify]): the code, the message, the
// google.rpc.ErrorInfo reason and the google.rpc.RetryInfo delay. Connect's
// codes are gRPC's (google.rpc.Code), so runtime/idemgrpc and
// runtime/idemconnect answer from this one table, each converting the code
// to its own type and the answer to its own error with details. The package
// depends on neither grpc-go nor connect-go; runtime/idemhttp's table is
// its problem types.
package idemrpc

import (
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Code is a google.rpc.Code: the same number as grpc-go's codes.Code and
// connect-go's connect.Code of the same name.
type Code uint32

// The codes of the table. The package doc of runtime/idemgrpc argues each
// against gRPC's guidance.
const (
	InvalidArgument    Code = 3
	PermissionDenied   Code = 7
	FailedPrecondition Code = 9
	Aborted            Code = 10
	Internal           Code = 13
	Unavailable        Code = 14
)

// Answer is how one error is answered.
type Answer struct {
	Code Code
	// Message names the problem and says what to do. It never echoes the
	// key, the scope, the fingerprints or the underlying database error.
	Message string
	// Reason is the google.rpc.ErrorInfo reason (idem.Kind.Reason), in
	// domain idem.ErrorDomain.
	Reason string
	// RetryDelay is the google.rpc.RetryInfo delay; 0 for none.
	RetryDelay time.Duration
}

// Names are the words an answer's messages use for the transport: what a
// call is called and where its key is sent.
type Names struct {
	Call string // "method" (gRPC), "procedure" (Connect)
	Key  string // "metadata idempotency-key", "the Idempotency-Key header"
}

// For returns the answer to err, an error of an idempotent call (or of the
// validation of its key or scope), and false for any other error, which is
// the application's to answer.
func For(err error, n Names) (Answer, bool) {
	c := idem.Classify(err)
	a, ok := answers[c.Kind]
	if !ok {
		return Answer{}, false
	}
	a.Message = strings.NewReplacer("{call}", n.Call, "{key}", n.Key).Replace(a.Message)
	if c.Reason != "" {
		a.Message += ": " + c.Reason
	}
	a.Reason = c.Kind.Reason()
	a.RetryDelay = c.RetryAfter
	return a, true
}

// ScopeUnknown is the answer when the scope function fails or names no
// scope, for a what ("call", "request"): the same code and reason as a scope
// the ledger cannot hold.
func ScopeUnknown(what string) Answer {
	return Answer{Code: PermissionDenied, Reason: idem.KindInvalidScope.Reason(),
		Message: "the account this " + what + " belongs to could not be determined, " +
			"so its idempotency key cannot be applied; check the " + what + "'s credentials"}
}

// answers is the table; a kind not listed is the application's. {call} and
// {key} stand for the Names; a key's or scope's reason follows the message.
var answers = map[idem.Kind]Answer{
	idem.KindMismatch: {Code: FailedPrecondition, Message: "idempotency key already used with a different request: " +
		"send a new key for a new request; resend the original request unchanged to get its response"},
	idem.KindInProgress: {Code: Aborted, Message: "a request with this idempotency key is still in progress: " +
		"retry with the same key and request after the RetryInfo delay to get its response"},
	idem.KindLockLost: {Code: Aborted, Message: "this attempt was taken over by another attempt with the same idempotency key: " +
		"retry with the same key and request to get the result of the attempt that completes"},
	idem.KindInvalidKey: {Code: InvalidArgument, Message: "idempotency key is malformed"},
	idem.KindNoKey: {Code: InvalidArgument, Message: "this {call} is idempotent and requires an idempotency key: send {key} " +
		"(or the request's " + idem.RequestIDField + " field) with a new unique key per request, the same key on retries"},
	idem.KindInvalidScope: {Code: PermissionDenied, Message: "the account this request belongs to cannot scope an idempotency key"},
	idem.KindOutcomeUnknown: {Code: Internal, Message: "the request was processed but its outcome could not be recorded, so it is not known whether it took effect: " +
		"retrying with this key returns this answer again; do not resend under a new key until the outcome has been checked"},
	idem.KindStoreUnavailable: {Code: Unavailable, Message: "the idempotency ledger is unavailable: the request was not processed or its outcome was not recorded; " +
		"retry with the same key and request"},
}
