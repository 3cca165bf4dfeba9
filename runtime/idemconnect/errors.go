package idemconnect

import (
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemrpc"
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
// validation), is answered, and false for any other error: runtime/idemrpc's
// table, which gRPC shares. The codes are argued in runtime/idemgrpc's
// package doc; Connect's codes are gRPC's.
func Map(err error) (Mapping, bool) {
	a, ok := idemrpc.For(err, names)
	if !ok {
		return Mapping{}, false
	}
	return mapping(a), true
}

// names are the words of this transport in idemrpc's messages.
var names = idemrpc.Names{Call: "procedure", Key: "the " + HeaderKey + " header"}

func mapping(a idemrpc.Answer) Mapping {
	return Mapping{Code: connect.Code(a.Code), Message: a.Message, Reason: a.Reason, RetryDelay: a.RetryDelay}
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
