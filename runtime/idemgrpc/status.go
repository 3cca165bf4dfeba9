package idemgrpc

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Mapping is how one kind of idem error is answered: its code, a fixed
// message that names the problem and says what to do, the
// google.rpc.ErrorInfo reason that tells it from the application's own
// errors with the same code, and, for the kinds a client should retry after
// a while, the delay to put in RetryInfo.
type Mapping struct {
	Code       codes.Code
	Message    string
	Reason     string        // ErrorInfo reason, in domain idem.ErrorDomain
	RetryDelay time.Duration // 0: no RetryInfo
}

// Map returns how err, an error of an idempotent call (or of the key's
// validation), is answered, and false for any other error, which is the
// application's to answer. The package doc argues each code. The message
// never echoes the key, the fingerprints or the underlying database error.
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
	code codes.Code
	msg  string // followed by ": " and the key's or scope's reason, if any
}

// answers is Map's table; a kind not listed is the application's.
var answers = map[idem.Kind]answer{
	idem.KindMismatch: {codes.FailedPrecondition, "idempotency key already used with a different request: " +
		"send a new key for a new request; resend the original request unchanged to get its response"},
	idem.KindInProgress: {codes.Aborted, "a request with this idempotency key is still in progress: " +
		"retry with the same key and request after the RetryInfo delay to get its response"},
	idem.KindLockLost: {codes.Aborted, "this attempt was taken over by another attempt with the same idempotency key: " +
		"retry with the same key and request to get the result of the attempt that completes"},
	idem.KindInvalidKey: {codes.InvalidArgument, "idempotency key is malformed"},
	idem.KindNoKey: {codes.InvalidArgument, "this method is idempotent and requires an idempotency key: send metadata " +
		DefaultMetadataKey + " (or the request's " + RequestIDField + " field) with a new unique key per request, the same key on retries"},
	idem.KindInvalidScope: {codes.PermissionDenied, "the account this request belongs to cannot scope an idempotency key"},
	idem.KindOutcomeUnknown: {codes.Internal, "the request was processed but its outcome could not be recorded, so it is not known whether it took effect: " +
		"retrying with this key returns this answer again; do not resend under a new key until the outcome has been checked"},
	idem.KindStoreUnavailable: {codes.Unavailable, "the idempotency ledger is unavailable: the request was not processed or its outcome was not recorded; " +
		"retry with the same key and request"},
}

// Status returns the gRPC status for err as Map maps it, with a
// google.rpc.ErrorInfo detail (its reason, domain idem.ErrorDomain, no
// metadata) and, when the mapping has a retry delay, a google.rpc.RetryInfo;
// false for an error Map does not know.
func Status(err error) (*status.Status, bool) {
	m, ok := Map(err)
	if !ok {
		return nil, false
	}
	return m.status(), true
}

// status builds m's status with its details.
func (m Mapping) status() *status.Status {
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: m.Reason, Domain: idem.ErrorDomain}}
	if m.RetryDelay > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(m.RetryDelay)})
	}
	st := status.New(m.Code, m.Message)
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st
}

// Error returns err as a gRPC status error: err itself when it already
// carries a status, the mapped status for an idem error, and err unchanged
// otherwise (gRPC answers it with codes.Unknown).
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	if st, ok := Status(err); ok {
		return st.Err()
	}
	return err
}

// RetryDelay returns the delay of the google.rpc.RetryInfo detail of st, and
// false when st has none.
func RetryDelay(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if err := ri.GetRetryDelay().CheckValid(); err != nil {
				return 0, false
			}
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// ErrorReason returns the reason of the google.rpc.ErrorInfo detail of st
// whose domain is idem.ErrorDomain (e.g. "IDEMPOTENCY_KEY_REUSED"), and ""
// when st has none: a status with the same code but without it is the
// application's own.
func ErrorReason(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idem.ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}
