package idemgrpc

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Mapping is how one kind of idem error is answered: its code, a fixed
// message that names the problem and says what to do, and, for the kinds a
// client should retry after a while, the delay to put in RetryInfo.
type Mapping struct {
	Code       codes.Code
	Message    string
	RetryDelay time.Duration // 0: no RetryInfo
}

// Map returns how err, an error of an idempotent call (or of the key's
// validation), is answered, and false for any other error, which is the
// application's to answer. The package doc argues each code. The message
// never echoes the key, the fingerprints or the underlying database error.
func Map(err error) (Mapping, bool) {
	if err == nil {
		return Mapping{}, false
	}
	var (
		inProgress *idem.InProgressError
		keyErr     *idem.KeyError
		scopeErr   *idem.ScopeError
	)
	switch {
	case errors.Is(err, idem.ErrMismatch):
		return Mapping{Code: codes.FailedPrecondition, Message: "idempotency key already used with a different request: " +
			"send a new key for a new request; resend the original request unchanged to get its response"}, true
	case errors.As(err, &inProgress) || errors.Is(err, idem.ErrInProgress):
		d := time.Second
		if inProgress != nil && inProgress.RetryAfter > d {
			d = inProgress.RetryAfter
		}
		return Mapping{Code: codes.Aborted, RetryDelay: d, Message: "a request with this idempotency key is still in progress: " +
			"retry with the same key and request after the RetryInfo delay to get its response"}, true
	case errors.Is(err, idem.ErrLockLost):
		return Mapping{Code: codes.Aborted, RetryDelay: time.Second, Message: "this attempt was taken over by another attempt with the same idempotency key: " +
			"retry with the same key and request to get the result of the attempt that completes"}, true
	case errors.As(err, &keyErr) || errors.Is(err, idem.ErrInvalidKey):
		msg := "idempotency key is malformed"
		if keyErr != nil && keyErr.Reason != "" {
			msg += ": " + printable(keyErr.Reason)
		}
		return Mapping{Code: codes.InvalidArgument, Message: msg}, true
	case errors.Is(err, idem.ErrNoKey):
		return Mapping{Code: codes.InvalidArgument, Message: "this method is idempotent and requires an idempotency key: send metadata " +
			DefaultMetadataKey + " (or the request's " + RequestIDField + " field) with a new unique key per request, the same key on retries"}, true
	case errors.As(err, &scopeErr) || errors.Is(err, idem.ErrInvalidScope):
		msg := "the account this request belongs to cannot scope an idempotency key"
		if scopeErr != nil && scopeErr.Reason != "" {
			msg += ": " + printable(scopeErr.Reason)
		}
		return Mapping{Code: codes.PermissionDenied, Message: msg}, true
	case errors.Is(err, idem.ErrOutcomeNotRecorded) && !errors.Is(err, idem.ErrStore):
		return Mapping{Code: codes.Internal, Message: "the request was processed but its outcome could not be recorded, so it is not known whether it took effect: " +
			"retrying with this key returns this answer again; do not resend under a new key until the outcome has been checked"}, true
	case errors.Is(err, idem.ErrStore):
		return Mapping{Code: codes.Unavailable, Message: "the idempotency ledger is unavailable: the request was not processed or its outcome was not recorded; " +
			"retry with the same key and request"}, true
	}
	return Mapping{}, false
}

// Status returns the gRPC status for err as Map maps it, with a
// google.rpc.RetryInfo detail when the mapping has a retry delay, and false
// for an error Map does not know.
func Status(err error) (*status.Status, bool) {
	m, ok := Map(err)
	if !ok {
		return nil, false
	}
	st := status.New(m.Code, m.Message)
	if m.RetryDelay > 0 {
		if withInfo, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(m.RetryDelay)}); derr == nil {
			st = withInfo
		}
	}
	return st, true
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

// printable replaces every byte outside printable ASCII with '?'.
func printable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
