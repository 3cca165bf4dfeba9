package idemconnect

import (
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Mapping is how one kind of idem error is answered: its code, a fixed
// message that names the problem and says what to do, and, for the kinds a
// client should retry after a while, the delay to put in RetryInfo.
type Mapping struct {
	Code       connect.Code
	Message    string
	RetryDelay time.Duration // 0: no RetryInfo
}

// Map returns how err, an error of an idempotent call (or of the key's
// validation), is answered, and false for any other error. The codes are
// runtime/idemgrpc's, argued in its package doc; Connect's codes are gRPC's.
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
		return Mapping{Code: connect.CodeFailedPrecondition, Message: "idempotency key already used with a different request: " +
			"send a new key for a new request; resend the original request unchanged to get its response"}, true
	case errors.As(err, &inProgress) || errors.Is(err, idem.ErrInProgress):
		d := time.Second
		if inProgress != nil && inProgress.RetryAfter > d {
			d = inProgress.RetryAfter
		}
		return Mapping{Code: connect.CodeAborted, RetryDelay: d, Message: "a request with this idempotency key is still in progress: " +
			"retry with the same key and request after the RetryInfo delay to get its response"}, true
	case errors.Is(err, idem.ErrLockLost):
		return Mapping{Code: connect.CodeAborted, RetryDelay: time.Second, Message: "this attempt was taken over by another attempt with the same idempotency key: " +
			"retry with the same key and request to get the result of the attempt that completes"}, true
	case errors.As(err, &keyErr) || errors.Is(err, idem.ErrInvalidKey):
		msg := "idempotency key is malformed"
		if keyErr != nil && keyErr.Reason != "" {
			msg += ": " + printable(keyErr.Reason)
		}
		return Mapping{Code: connect.CodeInvalidArgument, Message: msg}, true
	case errors.Is(err, idem.ErrNoKey):
		return Mapping{Code: connect.CodeInvalidArgument, Message: "this procedure is idempotent and requires an idempotency key: send the " +
			HeaderKey + " header (or the request's " + RequestIDField + " field) with a new unique key per request, the same key on retries"}, true
	case errors.As(err, &scopeErr) || errors.Is(err, idem.ErrInvalidScope):
		msg := "the account this request belongs to cannot scope an idempotency key"
		if scopeErr != nil && scopeErr.Reason != "" {
			msg += ": " + printable(scopeErr.Reason)
		}
		return Mapping{Code: connect.CodePermissionDenied, Message: msg}, true
	case errors.Is(err, idem.ErrOutcomeNotRecorded) && !errors.Is(err, idem.ErrStore):
		return Mapping{Code: connect.CodeInternal, Message: "the request was processed but its outcome could not be recorded, so it is not known whether it took effect: " +
			"retrying with this key returns this answer again; do not resend under a new key until the outcome has been checked"}, true
	case errors.Is(err, idem.ErrStore):
		return Mapping{Code: connect.CodeUnavailable, Message: "the idempotency ledger is unavailable: the request was not processed or its outcome was not recorded; " +
			"retry with the same key and request"}, true
	}
	return Mapping{}, false
}

// Error returns err as a *connect.Error: err itself when it already is one,
// the mapped error (with a google.rpc.RetryInfo detail when the mapping has
// a delay) for an idem error, and err unchanged otherwise.
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
	out := connect.NewError(m.Code, errors.New(m.Message))
	if m.RetryDelay > 0 {
		if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(m.RetryDelay)}); derr == nil {
			out.AddDetail(d)
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
