package grpcapi_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1/paymentsv1connect"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// answer is what a plain client (no idempotency interceptor) got: the
// code, the RetryInfo delay if any, and the replay header.
type answer struct {
	code     codes.Code
	retry    time.Duration
	replayed bool
	receipt  proto.Message
}

// plain is one transport seen by a client without the interceptor, so the
// server's answers are seen as they are.
type plain interface {
	charge(ctx context.Context, key string, req *paymentsv1.ChargeRequest) answer
	payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) answer
}

type plainGRPC struct {
	c paymentsv1.PaymentsServiceClient
}

func newPlainGRPC(t *testing.T, addr string) plainGRPC {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return plainGRPC{c: paymentsv1.NewPaymentsServiceClient(cc)}
}

func grpcAnswer(resp proto.Message, header metadata.MD, err error) answer {
	st := status.Convert(err)
	a := answer{code: st.Code(), replayed: len(header.Get(idemgrpc.MetadataReplayed)) == 1 && header.Get(idemgrpc.MetadataReplayed)[0] == "true"}
	a.retry, _ = idemgrpc.RetryDelay(st)
	if err == nil {
		a.receipt = resp
	}
	return a
}

func (p plainGRPC) ctx(ctx context.Context, key string) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer acct_1")
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultMetadataKey, key)
	}
	return ctx
}

func (p plainGRPC) charge(ctx context.Context, key string, req *paymentsv1.ChargeRequest) answer {
	var h metadata.MD
	r, err := p.c.Charge(p.ctx(ctx, key), req, grpc.Header(&h))
	return grpcAnswer(r, h, err)
}

func (p plainGRPC) payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) answer {
	var h metadata.MD
	r, err := p.c.Payout(p.ctx(ctx, key), req, grpc.Header(&h))
	return grpcAnswer(r, h, err)
}

type plainConnect struct {
	c paymentsv1connect.PaymentsServiceClient
}

func connectAnswer[T any](resp *connect.Response[T], err error) answer {
	if err != nil {
		a := answer{code: codes.Code(connect.CodeOf(err))}
		a.retry, _ = idemconnect.RetryDelay(err)
		return a
	}
	return answer{code: codes.OK, replayed: resp.Header().Get(idemconnect.HeaderReplayed) == "true", receipt: any(resp.Msg).(proto.Message)}
}

func (p plainConnect) charge(ctx context.Context, key string, req *paymentsv1.ChargeRequest) answer {
	return connectAnswer(p.c.Charge(ctx, withAuth(req, "acct_1", key)))
}

func (p plainConnect) payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) answer {
	return connectAnswer(p.c.Payout(ctx, withAuth(req, "acct_1", key)))
}

// transports runs fn against the service over grpc-go and over connect-go
// (the Connect protocol over h2c, and the gRPC protocol).
func transports(t *testing.T, fn func(t *testing.T, e *env, p plain)) {
	t.Run("grpc-go", func(t *testing.T) {
		e := newEnv(t, "acct_1")
		fn(t, e, newPlainGRPC(t, e.grpcAddr))
	})
	t.Run("connect-go", func(t *testing.T) {
		e := newEnv(t, "acct_1")
		fn(t, e, plainConnect{c: paymentsv1connect.NewPaymentsServiceClient(h2c(), e.connectURL)})
	})
	t.Run("connect-go-grpc-protocol", func(t *testing.T) {
		e := newEnv(t, "acct_1")
		fn(t, e, plainConnect{c: paymentsv1connect.NewPaymentsServiceClient(h2c(), e.connectURL, connect.WithGRPC())})
	})
}

func TestTwinGetsAbortedWithRetryInfo(t *testing.T) {
	transports(t, func(t *testing.T, e *env, p plain) {
		e.bank.held.Store(true)
		first := make(chan answer, 1)
		go func() { first <- p.payout(t.Context(), "po-1", &paymentsv1.PayoutRequest{AmountCents: 500}) }()
		<-e.bank.started // the first call holds the key, waiting for the bank
		twin := p.payout(t.Context(), "po-1", &paymentsv1.PayoutRequest{AmountCents: 500})
		assert.Equal(t, codes.Aborted, twin.code, "the twin is told the call is in progress")
		assert.GreaterOrEqual(t, twin.retry, time.Second, "with a RetryInfo delay")
		e.bank.held.Store(false)
		close(e.bank.release)
		got := <-first
		require.Equal(t, codes.OK, got.code)
		again := p.payout(t.Context(), "po-1", &paymentsv1.PayoutRequest{AmountCents: 500})
		require.Equal(t, codes.OK, again.code)
		assert.True(t, again.replayed, "the retry after the first finished is a replay")
		assert.True(t, proto.Equal(got.receipt, again.receipt), "of the first answer")
		assert.Equal(t, 1, e.bank.Transfers(), "one transfer")
		assert.Equal(t, 1, count(t, e, `SELECT count(*) FROM payouts`))
	})
}

func TestReusedKeyWithAnotherRequestIsFailedPrecondition(t *testing.T) {
	transports(t, func(t *testing.T, e *env, p plain) {
		require.Equal(t, codes.OK, p.charge(t.Context(), "k-1", chargeReq(1, false)).code)
		other := p.charge(t.Context(), "k-1", chargeReq(2, false))
		assert.Equal(t, codes.FailedPrecondition, other.code)
		missing := p.charge(t.Context(), "", chargeReq(3, false))
		assert.Equal(t, codes.InvalidArgument, missing.code, "no key: the wrapper refuses the call")
		assert.Equal(t, 1, count(t, e, `SELECT count(*) FROM payments`))
	})
}

func TestRequestIDWorksAsTheMetadataKey(t *testing.T) {
	transports(t, func(t *testing.T, e *env, p plain) {
		req := chargeReq(1, true)
		first := p.charge(t.Context(), "", req)
		require.Equal(t, codes.OK, first.code)
		assert.False(t, first.replayed)
		again := p.charge(t.Context(), "", req)
		require.Equal(t, codes.OK, again.code)
		assert.True(t, again.replayed, "the same request_id replays")
		assert.True(t, proto.Equal(first.receipt, again.receipt))

		byKey := proto.Clone(req).(*paymentsv1.ChargeRequest)
		byKey.RequestId = ""
		viaMetadata := p.charge(t.Context(), req.GetRequestId(), byKey)
		require.Equal(t, codes.OK, viaMetadata.code)
		assert.True(t, viaMetadata.replayed, "the request_id sent as the metadata key is the same key")
		assert.True(t, proto.Equal(first.receipt, viaMetadata.receipt))

		changed := proto.Clone(req).(*paymentsv1.ChargeRequest)
		changed.AmountCents++
		assert.Equal(t, codes.FailedPrecondition, p.charge(t.Context(), "", changed).code, "a request_id reused with another request")

		nilUUID := chargeReq(2, false)
		nilUUID.RequestId = "00000000-0000-0000-0000-000000000000"
		assert.Equal(t, codes.InvalidArgument, p.charge(t.Context(), "", nilUUID).code, "the nil UUID is refused")
		assert.Equal(t, 1, count(t, e, `SELECT count(*) FROM payments`))
	})
}
