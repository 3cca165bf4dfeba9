package scenario_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/idemgen/idemgen/example/cmd/demo/scenario"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1/paymentsv1connect"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestGRPCAndConnectBesideHTTP checks that the demo serves the payments
// service over grpc-go on Env.GRPCAddr and over connect-go (the Connect and
// the gRPC protocol, h2c) on the API's port, with the interceptors: a retry
// with the same key is a replay, one payment each.
func TestGRPCAndConnectBesideHTTP(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	env, err := scenario.Start(t.Context(), db.URL, scenario.Options{BankDelay: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Close(context.Background()) })
	charge := &paymentsv1.ChargeRequest{AmountCents: 1250, Currency: "EUR", Description: "order 1042",
		Card: &paymentsv1.Card{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030}}

	cc, err := grpc.NewClient(env.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{})))
	require.NoError(t, err)
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer acct_42", idemgrpc.DefaultMetadataKey, "grpc-1")
	gc := paymentsv1.NewPaymentsServiceClient(cc)
	first, err := gc.Charge(ctx, charge)
	require.NoError(t, err)
	var h metadata.MD
	again, err := gc.Charge(ctx, charge, grpc.Header(&h))
	require.NoError(t, err)
	assert.Equal(t, first.GetPaymentId(), again.GetPaymentId())
	assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))

	h2c := &http.Client{Transport: &http.Transport{Protocols: new(http.Protocols)}}
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
	for _, opt := range []connect.ClientOption{connect.WithProtoJSON(), connect.WithGRPC()} {
		c := paymentsv1connect.NewPaymentsServiceClient(h2c, env.APIURL, opt,
			connect.WithInterceptors(idemconnect.NewClientInterceptor(idemconnect.ClientConfig{})))
		req := connect.NewRequest(charge)
		req.Header().Set("Authorization", "Bearer acct_42")
		req.Header().Set(idemconnect.HeaderKey, "connect-1")
		first, err := c.Charge(t.Context(), req)
		require.NoError(t, err)
		again, err := c.Charge(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, first.Msg.GetPaymentId(), again.Msg.GetPaymentId())
		assert.Equal(t, "true", again.Header().Get(idemconnect.HeaderReplayed))
	}

	var payments int
	require.NoError(t, env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM payments`).Scan(&payments))
	assert.Equal(t, 2, payments, "one payment per key: grpc-1 and connect-1 (sent over both connect-go protocols)")
}
