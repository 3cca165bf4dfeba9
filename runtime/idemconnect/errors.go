package idemconnect

import (
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Mapping is how one kind of idem error is answered: its code, a fixed
// message that names the problem and says what to do, the
// google.rpc.ErrorInfo reason that tells it from the application's own
// errors with the same code, and, for the kinds a client should retry after
// a while, the delay to put in RetryInfo.
type Mapping struct {
	Code       connect.Code
	Message    string
	Reason     string        // ErrorInfo reason, in domain idem.ErrorDomain
	RetryDelay time.Duration // 0: no RetryInfo
}

// Map returns how err, an error of an idempotent call (or of the key's
// validation), is answered, and false for any other error. The codes are
// runtime/idemgrpc's, argued in its package doc; Connect's codes are gRPC's.
func Map(err error) (Mapping, bool) {
	c := idem.Classify(err)
	a, ok := answers[c.Kind]
	if !ok {
		return Mapping{}, false
	}
	if c.Reason != "" {
		a.msg += ": " + c.Reason
	}
	return Mapping{Code: a.code, Message: a.msg, Reason: c.Kind.Reason(), RetryDelay: c.RetryAfter}, true
}

// answer is the code and message of one kind of idem error.
type answer struct {
	code connect.Code
	msg  string // followed by ": " and the key's or scope's reason, if any
}

// answers is Map's table; a kind not listed is the application's.
var answers = map[idem.Kind]answer{
	idem.KindMismatch: {connect.CodeFailedPrecondition, "idempotency key already used with a different request: " +
		"send a new key for a new request; resend the original request unchanged to get its response"},
	idem.KindInProgress: {connect.CodeAborted, "a request with this idempotency key is still in progress: " +
		"retry with the same key and request after the RetryInfo delay to get its response"},
	idem.KindLockLost: {connect.CodeAborted, "this attempt was taken over by another attempt with the same idempotency key: " +
		"retry with the same key and request to get the result of the attempt that completes"},
	idem.KindInvalidKey: {connect.CodeInvalidArgument, "idempotency key is malformed"},
	idem.KindNoKey: {connect.CodeInvalidArgument, "this procedure is idempotent and requires an idempotency key: send the " +
		HeaderKey + " header (or the request's " + RequestIDField + " field) with a new unique key per request, the same key on retries"},
	idem.KindInvalidScope: {connect.CodePermissionDenied, "the account this request belongs to cannot scope an idempotency key"},
	idem.KindOutcomeUnknown: {connect.CodeInternal, "the request was processed but its outcome could not be recorded, so it is not known whether it took effect: " +
		"retrying with this key returns this answer again; do not resend under a new key until the outcome has been checked"},
	idem.KindStoreUnavailable: {connect.CodeUnavailable, "the idempotency ledger is unavailable: the request was not processed or its outcome was not recorded; " +
		"retry with the same key and request"},
}

// Error returns err as a *connect.Error: err itself when it already is one,
// the mapped error for an idem error (with a google.rpc.ErrorInfo detail,
// its reason in domain idem.ErrorDomain and no metadata, and a
// google.rpc.RetryInfo when the mapping has a delay), and err unchanged
// otherwise.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	m, ok := Map(err)
	if !ok {
		return err
	}
	return m.error()
}

// error builds m's *connect.Error with its details.
func (m Mapping) error() *connect.Error {
	out := connect.NewError(m.Code, errors.New(m.Message))
	details := []proto.Message{&errdetails.ErrorInfo{Reason: m.Reason, Domain: idem.ErrorDomain}}
	if m.RetryDelay > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(m.RetryDelay)})
	}
	for _, d := range details {
		if detail, err := connect.NewErrorDetail(d); err == nil {
			out.AddDetail(detail)
		}
	}
	return out
}

// RetryDelay returns the delay of the google.rpc.RetryInfo detail of err,
// and false when it has none.
func RetryDelay(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if ri, ok := v.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil && ri.GetRetryDelay().CheckValid() == nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// ErrorReason returns the reason of the google.rpc.ErrorInfo detail of err
// whose domain is idem.ErrorDomain (e.g. "IDEMPOTENCY_KEY_REUSED"), and ""
// when it has none: an error with the same code but without it is the
// application's own.
func ErrorReason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idem.ErrorDomain {
				return ei.GetReason()
			}
		}
	}
	return ""
}
