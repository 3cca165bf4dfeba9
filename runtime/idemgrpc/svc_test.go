package idemgrpc_test

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// The tests run a small payments service, described by a proto file built
// here (no generated code): Charge is atomic, Payout external and blocks
// until released, Seat atomic and holds the seat's row until released, Get
// is declared NO_SIDE_EFFECTS.

const service = "idemgrpc.test.Payments"

var (
	reqDesc, receiptDesc protoreflect.MessageDescriptor
	chargeMethod         = &idem.Method[int64]{Name: "Test.Charge"}
	payoutMethod         = &idem.Method[int64]{Name: "Test.Payout", LockTimeout: 4 * time.Second}
	seatMethod           = &idem.Method[int64]{Name: "Test.Seat"}
)

func init() {
	str, i64 := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	method := func(name string, level descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(".idemgrpc.test.ChargeRequest"),
			OutputType: proto.String(".idemgrpc.test.Receipt"), Options: &descriptorpb.MethodOptions{IdempotencyLevel: level.Enum()}}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("idemgrpc/test/payments.proto"), Package: proto.String("idemgrpc.test"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("ChargeRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("request_id"), Number: proto.Int32(1), Type: str, Label: opt, JsonName: proto.String("requestId")},
				{Name: proto.String("amount"), Number: proto.Int32(2), Type: i64, Label: opt, JsonName: proto.String("amount")},
			}},
			{Name: proto.String("Receipt"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("payment_id"), Number: proto.Int32(1), Type: i64, Label: opt, JsonName: proto.String("paymentId")},
			}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Payments"), Method: []*descriptorpb.MethodDescriptorProto{
			method("Charge", descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN),
			method("Payout", descriptorpb.MethodOptions_IDEMPOTENT),
			method("Seat", descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN),
			method("Get", descriptorpb.MethodOptions_NO_SIDE_EFFECTS),
		}}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic(err)
	}
	reqDesc, receiptDesc = fd.Messages().ByName("ChargeRequest"), fd.Messages().ByName("Receipt")
}

func newReq(requestID string, amount int64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(reqDesc)
	m.Set(reqDesc.Fields().ByName("request_id"), protoreflect.ValueOfString(requestID))
	m.Set(reqDesc.Fields().ByName("amount"), protoreflect.ValueOfInt64(amount))
	return m
}

func amountOf(m *dynamicpb.Message) int64 { return m.Get(reqDesc.Fields().ByName("amount")).Int() }

func paymentID(m *dynamicpb.Message) int64 {
	return m.Get(receiptDesc.Fields().ByName("payment_id")).Int()
}

// svc is the service under test with its database and counters.
type svc struct {
	db       *idemtest.DB
	store    *idem.Store
	executed atomic.Int64
	attempts atomic.Int64 // calls that reached a handler
	sawKey   chan string  // the idempotency key of every call to Get
	started  chan struct{}
	release  chan struct{}
	fail     func(ctx context.Context, attempt int64) error // if set, Charge fails with its error before the ledger
	onSQL    bool                                           // the store is on database/sql: Charge runs through idem.Atomic
	addr     string                                         // the server's address

	// seats is Seat's store, whose claim wait is 300 ms; seatHold counts
	// the Seat bodies past their first statement (the seat's row) and
	// holds the first of them there.
	seats    *idem.Store
	seatHold *idemtest.Hold
}

func fingerprint(amount int64) []byte {
	f := idem.NewFingerprinter("Test.Charge")
	f.Field("Amount")
	f.Int(amount)
	return f.Sum()
}

func (s *svc) charge(ctx context.Context, req *dynamicpb.Message) (*dynamicpb.Message, error) {
	n := s.attempts.Add(1)
	if s.fail != nil {
		if err := s.fail(ctx, n); err != nil {
			return nil, err
		}
	}
	id, err := s.chargeBody(ctx, amountOf(req))
	return receipt(id), err
}

// chargeBody is Charge's work, one payment row, through idem.Atomic on a
// pgx.Tx, or through idem.Atomic on a *sql.Tx when the store is on
// database/sql (a service on sqlc, bun or GORM).
func (s *svc) chargeBody(ctx context.Context, amount int64) (int64, error) {
	const insert = `INSERT INTO payments (amount) VALUES ($1) RETURNING id`
	if s.onSQL {
		return idem.Atomic(ctx, s.store, chargeMethod, fingerprint(amount), func(ctx context.Context, tx *sql.Tx) (int64, error) {
			s.executed.Add(1)
			var id int64
			err := tx.QueryRowContext(ctx, insert, amount).Scan(&id)
			return id, err
		})
	}
	return idem.Atomic(ctx, s.store, chargeMethod, fingerprint(amount), func(ctx context.Context, tx pgx.Tx) (int64, error) {
		s.executed.Add(1)
		var id int64
		err := tx.QueryRow(ctx, insert, amount).Scan(&id)
		return id, err
	})
}

func (s *svc) payout(ctx context.Context, req *dynamicpb.Message) (*dynamicpb.Message, error) {
	id, err := idem.External(ctx, s.store, payoutMethod, fingerprint(amountOf(req)), func(ctx context.Context) (int64, error) {
		s.executed.Add(1)
		s.started <- struct{}{}
		select {
		case <-s.release:
			return 99, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	return receipt(id), err
}

// seat takes the seat: it adds one to the seat's row and records a
// payment, through idem.Atomic on a pgx.Tx or, on database/sql, a *sql.Tx.
// The first body to update the row holds it until the test releases seatHold.
func (s *svc) seat(ctx context.Context, req *dynamicpb.Message) (*dynamicpb.Message, error) {
	const take, insert = `UPDATE seats SET taken = taken + 1 WHERE id = 1`, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`
	amount := amountOf(req)
	fp := fingerprint(amount)
	var id int64
	var err error
	if s.onSQL {
		id, err = idem.Atomic(ctx, s.seats, seatMethod, fp, func(ctx context.Context, tx *sql.Tx) (int64, error) {
			if _, err := tx.ExecContext(ctx, take); err != nil {
				return 0, err
			}
			if err := s.seatHold.Pass(ctx); err != nil {
				return 0, err
			}
			var id int64
			return id, tx.QueryRowContext(ctx, insert, amount).Scan(&id)
		})
	} else {
		id, err = idem.Atomic(ctx, s.seats, seatMethod, fp, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			if _, err := tx.Exec(ctx, take); err != nil {
				return 0, err
			}
			if err := s.seatHold.Pass(ctx); err != nil {
				return 0, err
			}
			var id int64
			return id, tx.QueryRow(ctx, insert, amount).Scan(&id)
		})
	}
	return receipt(id), err
}

func (s *svc) get(ctx context.Context, _ *dynamicpb.Message) (*dynamicpb.Message, error) {
	key, _ := idem.KeyFrom(ctx)
	s.sawKey <- key
	return receipt(7), nil
}

func receipt(id int64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(receiptDesc)
	m.Set(receiptDesc.Fields().ByName("payment_id"), protoreflect.ValueOfInt64(id))
	return m
}

func unary(name string, fn func(context.Context, *dynamicpb.Message) (*dynamicpb.Message, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := dynamicpb.NewMessage(reqDesc)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) { return fn(ctx, req.(*dynamicpb.Message)) }
		if ic == nil {
			return h(ctx, req)
		}
		return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/" + service + "/" + name}, h)
	}}
}

// bearerScope is the scope function of the tests: the authorization
// metadata's bearer token.
func bearerScope(ctx context.Context, _ string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if acct, ok := strings.CutPrefix(v, "Bearer "); ok {
			return acct, nil
		}
	}
	return "", status.Error(codes.Unauthenticated, "no bearer token")
}

// start serves the service on loopback behind the server interceptor and
// returns a connection to it with the given dial options.
func start(t testing.TB, opts ...grpc.DialOption) (*svc, *grpc.ClientConn) {
	return startOn(t, false, opts...)
}

// startOn is start; onSQL builds the store on database/sql
// (idem.NewSQLStore over the database's *sql.DB) instead of the pgx pool.
func startOn(t testing.TB, onSQL bool, opts ...grpc.DialOption) (*svc, *grpc.ClientConn) {
	t.Helper()
	return serve(t, onSQL, idemgrpc.ServerConfig{Scope: bearerScope}, opts...)
}

// serve is startOn with the server interceptor's configuration.
func serve(t testing.TB, onSQL bool, cfg idemgrpc.ServerConfig, opts ...grpc.DialOption) (*svc, *grpc.ClientConn) {
	t.Helper()
	s := &svc{
		db: idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`,
			`CREATE TABLE seats (id int PRIMARY KEY, taken bigint NOT NULL)`, `INSERT INTO seats VALUES (1, 0)`)),
		sawKey:   make(chan string, 16),
		started:  make(chan struct{}, 1),
		release:  make(chan struct{}),
		seatHold: idemtest.NewHold(),
		onSQL:    onSQL,
	}
	s.store, s.seats = newStore(t, s.db, onSQL), newStore(t, s.db, onSQL, idem.WithClaimWait(300*time.Millisecond))
	srv := grpc.NewServer(grpc.UnaryInterceptor(idemgrpc.UnaryServerInterceptor(cfg)))
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: service, HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{
		unary("Charge", s.charge), unary("Payout", s.payout), unary("Seat", s.seat), unary("Get", s.get),
	}}, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	s.addr = ln.Addr().String()
	cc, err := grpc.NewClient(ln.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return s, cc
}

// newStore is a store on db's pgx pool or, onSQL, on its *sql.DB.
func newStore(t testing.TB, db *idemtest.DB, onSQL bool, opts ...idem.Option) *idem.Store {
	t.Helper()
	var s *idem.Store
	var err error
	if onSQL {
		s, err = idem.NewSQLStore(db.SQL, opts...)
	} else {
		s, err = idem.NewStore(db.Pool, opts...)
	}
	require.NoError(t, err)
	return s
}

// onBothStores runs test on a service whose store is on the pgx pool, then
// on one whose store is on database/sql (idem.NewSQLStore, Charge on a
// *sql.Tx through idem.Atomic): the interceptor serves both unchanged.
func onBothStores(t *testing.T, test func(t *testing.T, s *svc, cc *grpc.ClientConn)) {
	for _, p := range []struct {
		name  string
		onSQL bool
	}{{"pgx", false}, {"database_sql", true}} {
		t.Run(p.name, func(t *testing.T) {
			s, cc := startOn(t, p.onSQL)
			test(t, s, cc)
		})
	}
}

func (s *svc) count(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

// taken is how many times the seat was taken.
func (s *svc) taken(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(), `SELECT taken FROM seats WHERE id = 1`).Scan(&n))
	return n
}

// call invokes method as account with the metadata key (none if "") and
// returns the receipt, the response header and the error.
func call(ctx context.Context, cc *grpc.ClientConn, method, account, key string, req *dynamicpb.Message) (*dynamicpb.Message, metadata.MD, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+account)
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultMetadataKey, key)
	}
	out := dynamicpb.NewMessage(receiptDesc)
	var header metadata.MD
	err := cc.Invoke(ctx, "/"+service+"/"+method, req, out, grpc.Header(&header))
	return out, header, err
}
