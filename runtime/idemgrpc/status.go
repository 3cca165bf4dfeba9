package idemgrpc

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
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
	Code       codes.Code
	Message    string
	Reason     string        // ErrorInfo reason, in domain idem.ErrorDomain
	RetryDelay time.Duration // 0: no RetryInfo
}

// Map returns how err, an error of an idempotent call (or of the key's
// validation), is answered, and false for any other error, which is the
// application's to answer: runtime/idemrpc's table, which Connect shares.
// The package doc argues each code. The message never echoes the key, the
// fingerprints or the underlying database error.
func Map(err error) (Mapping, bool) {
	a, ok := idemrpc.For(err, names)
	if !ok {
		return Mapping{}, false
	}
	return mapping(a), true
}

// names are the words of this transport in idemrpc's messages.
var names = idemrpc.Names{Call: "method", Key: "metadata " + DefaultMetadataKey}

func mapping(a idemrpc.Answer) Mapping {
	return Mapping{Code: codes.Code(a.Code), Message: a.Message, Reason: a.Reason, RetryDelay: a.RetryDelay}
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
