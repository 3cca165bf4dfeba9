package grpcapi

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1/paymentsv1connect"
	"github.com/idemgen/idemgen/runtime/idemconnect"
)

// NewConnectHandler returns the path and handler of the payments service
// over connect-go (the Connect, gRPC and gRPC-Web protocols), behind
// idemconnect.NewHandlerInterceptor with the caller's account as the
// scope. Mount it on a mux beside the HTTP API; serve it over HTTP/2 (h2c
// without TLS) for gRPC clients.
func NewConnectHandler(svc *IdempotentPayments, opts ...connect.HandlerOption) (string, http.Handler) {
	keys := idemconnect.NewHandlerInterceptor(idemconnect.HandlerConfig{Scope: func(_ context.Context, req connect.AnyRequest) (string, error) {
		return account(req.Header().Values("Authorization"))
	}})
	return paymentsv1connect.NewPaymentsServiceHandler(&connectService{svc: svc},
		append([]connect.HandlerOption{connect.WithInterceptors(keys)}, opts...)...)
}

// connectService is the payments service over connect-go.
type connectService struct{ svc *IdempotentPayments }

// Charge implements paymentsv1connect.PaymentsServiceHandler.
func (s *connectService) Charge(ctx context.Context, req *connect.Request[paymentsv1.ChargeRequest]) (*connect.Response[paymentsv1.Receipt], error) {
	if _, err := account(req.Header().Values("Authorization")); err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	r, err := s.svc.Charge(ctx, req.Msg)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(r), nil
}

// Refund implements paymentsv1connect.PaymentsServiceHandler.
func (s *connectService) Refund(ctx context.Context, req *connect.Request[paymentsv1.RefundRequest]) (*connect.Response[paymentsv1.RefundReceipt], error) {
	if _, err := account(req.Header().Values("Authorization")); err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	r, err := s.svc.Refund(ctx, req.Msg)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(r), nil
}

// Payout implements paymentsv1connect.PaymentsServiceHandler.
func (s *connectService) Payout(ctx context.Context, req *connect.Request[paymentsv1.PayoutRequest]) (*connect.Response[paymentsv1.PayoutReceipt], error) {
	if _, err := account(req.Header().Values("Authorization")); err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	r, err := s.svc.Payout(ctx, req.Msg)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(r), nil
}

// connectError maps the idempotency errors (idemconnect.Error) and the
// service's own errors to Connect errors.
func connectError(err error) error {
	if _, ok := idemconnect.Map(err); ok {
		return idemconnect.Error(err)
	}
	code, msg := appCode(err)
	return connect.NewError(connect.Code(code), errors.New(msg))
}
