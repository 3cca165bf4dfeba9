package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// NewGRPCServer returns a grpc-go server with the payments service
// registered behind idemgrpc.UnaryServerInterceptor, the caller's account
// as the scope. opts are added after the interceptor (chain more with
// grpc.ChainUnaryInterceptor).
func NewGRPCServer(svc *IdempotentPayments, opts ...grpc.ServerOption) *grpc.Server {
	keys := idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{Scope: func(ctx context.Context, _ string) (string, error) {
		return grpcAccount(ctx)
	}})
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(keys)}, opts...)...)
	paymentsv1.RegisterPaymentsServiceServer(srv, &grpcService{svc: svc})
	return srv
}

func grpcAccount(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return account(md.Get("authorization"))
}

// grpcService is the payments service over grpc-go.
type grpcService struct {
	paymentsv1.UnimplementedPaymentsServiceServer
	svc *IdempotentPayments
}

// Charge implements paymentsv1.PaymentsServiceServer.
func (s *grpcService) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.Receipt, error) {
	if _, err := grpcAccount(ctx); err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	r, err := s.svc.Charge(ctx, req)
	if err != nil {
		return nil, grpcError(err)
	}
	return r, nil
}

// Refund implements paymentsv1.PaymentsServiceServer.
func (s *grpcService) Refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundReceipt, error) {
	if _, err := grpcAccount(ctx); err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	r, err := s.svc.Refund(ctx, req)
	if err != nil {
		return nil, grpcError(err)
	}
	return r, nil
}

// Payout implements paymentsv1.PaymentsServiceServer.
func (s *grpcService) Payout(ctx context.Context, req *paymentsv1.PayoutRequest) (*paymentsv1.PayoutReceipt, error) {
	if _, err := grpcAccount(ctx); err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	r, err := s.svc.Payout(ctx, req)
	if err != nil {
		return nil, grpcError(err)
	}
	return r, nil
}

// grpcError maps the idempotency errors (idemgrpc.Error) and the service's
// own errors to statuses.
func grpcError(err error) error {
	if _, ok := idemgrpc.Map(err); ok {
		return idemgrpc.Error(err)
	}
	code, msg := appCode(err)
	return status.Error(codes.Code(code), msg)
}

// appCode returns the code (the same in gRPC and Connect) and message for
// one of the service's own errors.
func appCode(err error) (uint32, string) {
	switch {
	case errors.Is(err, example.ErrCardDeclined), errors.Is(err, example.ErrInsufficientFunds),
		errors.Is(err, example.ErrAlreadyRefunded):
		return uint32(codes.FailedPrecondition), err.Error()
	case errors.Is(err, example.ErrNotFound):
		return uint32(codes.NotFound), err.Error()
	case errors.Is(err, example.ErrInvalidRequest):
		return uint32(codes.InvalidArgument), err.Error()
	}
	return uint32(codes.Unknown), "the request failed; it is safe to retry with the same idempotency key"
}
