package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleDB returns a fresh database, with the ledger unless the options
// say otherwise, on the server the package's tests share (idemtest.Open:
// an Example has no *testing.T for idemtest.New), and a function that
// drops it. A service passes its own *pgxpool.Pool to idem.NewStore
// instead.
func exampleDB(setup ...string) (*idemtest.DB, func()) {
	db, err := idemtest.Open(context.Background(), "example", idemtest.WithSetup(setup...))
	if err != nil {
		panic(err)
	}
	return db, func() { _ = db.Close() }
}

// exampleService is what protoc-gen-go-grpc generates for
//
//	service Payments { rpc Charge(google.protobuf.Int64Value) returns (google.protobuf.StringValue); }
//
// with charge as the implementation of Charge.
func exampleService(charge func(context.Context, *wrapperspb.Int64Value) (*wrapperspb.StringValue, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{ServiceName: "shop.Payments", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
		MethodName: "Charge",
		Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := new(wrapperspb.Int64Value)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) { return charge(ctx, req.(*wrapperspb.Int64Value)) }
			if ic == nil {
				return h(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/shop.Payments/Charge"}, h)
		},
	}}}
}

// Example serves an idempotent Charge behind UnaryServerInterceptor, and
// calls it through UnaryClientInterceptor over a connection that loses the
// first answer. The client interceptor made one key for the call and sent it
// on both attempts; the second is answered from the ledger (the
// idempotent-replayed header), and the charge ran once.
func Example() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB(`CREATE TABLE charges (id bigserial PRIMARY KEY, amount bigint NOT NULL)`)
	defer stop()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}

	// The server.
	chargeMethod := &idem.Method[string]{Name: "Payments.Charge"}
	var runs atomic.Int64 // the handler runs on the server's goroutines
	charge := func(ctx context.Context, req *wrapperspb.Int64Value) (*wrapperspb.StringValue, error) {
		f := idem.NewFingerprinter(chargeMethod.Name)
		f.Field("amount")
		f.Int(req.GetValue())
		receipt, err := idem.Atomic(ctx, store, chargeMethod, f.Sum(), func(ctx context.Context, tx pgx.Tx) (string, error) {
			runs.Add(1)
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES ($1) RETURNING id`, req.GetValue()).Scan(&id)
			return fmt.Sprintf("charge %d of %d", id, req.GetValue()), err
		})
		if err != nil {
			return nil, err // the interceptor answers the runtime's errors with their statuses
		}
		return wrapperspb.String(receipt), nil
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{
		SingleTenant: true, // a service with tenants sets Scope instead, from the authenticated caller
	})))
	srv.RegisterService(exampleService(charge), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	// The client: the first answer is lost on the way back.
	lost := false
	loseFirstAnswer := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && !lost {
			lost = true
			return status.Error(codes.Unavailable, "connection reset by peer")
		}
		return err
	}
	retries := 0
	cc, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(
			idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{
				BaseDelay: 10 * time.Millisecond,
				OnRetry:   func(string, int, error) { retries++ },
			}),
			loseFirstAnswer,
		))
	if err != nil {
		panic(err)
	}
	defer cc.Close()

	var header metadata.MD
	receipt := new(wrapperspb.StringValue)
	err = cc.Invoke(context.Background(), "/shop.Payments/Charge", wrapperspb.Int64(1250), receipt, grpc.Header(&header))
	fmt.Println(receipt.GetValue(), err)
	fmt.Println("retries:", retries, "replayed:", header.Get(idemgrpc.MetadataReplayed))
	fmt.Println("body runs:", runs.Load())
	// Output:
	// charge 1 of 1250 <nil>
	// retries: 1 replayed: [true]
	// body runs: 1
}
