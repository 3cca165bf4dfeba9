package grpcapi_test

import (
	"context"
	crand "crypto/rand"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1/paymentsv1connect"
	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
	"github.com/idemgen/idemgen/runtime/idemproto"
)

// caller is one client of the payments service, over one transport.
type caller interface {
	charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.Receipt, error)
	refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundReceipt, error)
	payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) (*paymentsv1.PayoutReceipt, error)
	replays() int64 // answers of charges and refunds marked as replays
}

// serviceConfig has grpc-go retry both methods on UNAVAILABLE. (grpc-go
// does not carry out a hedgingPolicy; hedge below does what one would.)
const serviceConfig = `{"methodConfig": [
  {"name": [{"service": "idemgen.example.payments.v1.PaymentsService"}],
   "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
                   "retryableStatusCodes": ["UNAVAILABLE"]}}
]}`

// hedge is a client interceptor that hedges Charge as a hedgingPolicy with
// maxAttempts 2 would: it sends a second copy of each attempt unless the
// first has answered after delay, and returns the first success, with its
// header (or, when both fail, the last error). Chained after the
// idempotency interceptor, both copies carry the call's key.
func hedge(delay time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != paymentsv1.PaymentsService_Charge_FullMethodName {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		header, opts := splitHeader(opts)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			reply  proto.Message
			header metadata.MD
			err    error
		}
		results := make(chan result, 2)
		send := func() {
			r := reply.(proto.Message).ProtoReflect().New().Interface()
			var h metadata.MD
			err := invoker(ctx, method, req, r, cc, append(slices.Clip(opts), grpc.Header(&h))...)
			results <- result{r, h, err}
		}
		go send()
		timer := time.NewTimer(delay)
		defer timer.Stop()
		sent := 1
		var last error
		for got := 0; got < sent; {
			select {
			case <-timer.C:
				go send()
				sent++
			case res := <-results:
				got++
				if res.err == nil {
					proto.Merge(reply.(proto.Message), res.reply)
					if header != nil {
						*header = res.header
					}
					return nil
				}
				last = res.err
				if sent == 1 { // the first failed before the hedge was due
					return last
				}
			}
		}
		return last
	}
}

// splitHeader takes the grpc.Header option out of opts: each hedged copy
// gets its own, and the winner's is handed on.
func splitHeader(opts []grpc.CallOption) (*metadata.MD, []grpc.CallOption) {
	var header *metadata.MD
	rest := make([]grpc.CallOption, 0, len(opts))
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok {
			header = h.HeaderAddr
			continue
		}
		rest = append(rest, o)
	}
	return header, rest
}

type grpcCaller struct {
	c        paymentsv1.PaymentsServiceClient
	acct     string
	replayed atomic.Int64 // answers marked idempotent-replayed
}

// note counts header as a replay if it says so.
func (g *grpcCaller) note(header metadata.MD) {
	if v := header.Get(idemgrpc.MetadataReplayed); len(v) == 1 && v[0] == "true" {
		g.replayed.Add(1)
	}
}

func newGRPCCaller(t *testing.T, addr, acct string, retries *atomic.Int64, rec *linear.Recorder) *grpcCaller {
	t.Helper()
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond}}),
		grpc.WithChainUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{
			MaxAttempts: 30, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
			OnRetry: func(string, int, error) { retries.Add(1) },
		}), hedge(5*time.Millisecond), recordGRPC(rec)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return &grpcCaller{c: paymentsv1.NewPaymentsServiceClient(cc), acct: acct}
}

func (g *grpcCaller) ctx(ctx context.Context, key string) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.acct)
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultMetadataKey, key)
	}
	return ctx
}

func (g *grpcCaller) charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.Receipt, error) {
	var h metadata.MD
	defer func() { g.note(h) }()
	return g.c.Charge(g.ctx(ctx, ""), req, grpc.Header(&h))
}

func (g *grpcCaller) refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundReceipt, error) {
	var h metadata.MD
	defer func() { g.note(h) }()
	return g.c.Refund(g.ctx(ctx, ""), req, grpc.Header(&h))
}

func (g *grpcCaller) replays() int64 { return g.replayed.Load() }

func (g *grpcCaller) payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) (*paymentsv1.PayoutReceipt, error) {
	return g.c.Payout(g.ctx(ctx, key), req)
}

type connectCaller struct {
	c        paymentsv1connect.PaymentsServiceClient
	acct     string
	replayed atomic.Int64 // answers marked Idempotent-Replayed
}

func (c *connectCaller) note(h http.Header) {
	if h.Get(idemconnect.HeaderReplayed) == "true" {
		c.replayed.Add(1)
	}
}

func (c *connectCaller) replays() int64 { return c.replayed.Load() }

func newConnectCaller(url, acct string, retries *atomic.Int64, opts ...connect.ClientOption) *connectCaller {
	ic := idemconnect.NewClientInterceptor(idemconnect.ClientConfig{
		MaxAttempts: 30, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
		OnRetry: func(string, int, error) { retries.Add(1) },
	})
	return &connectCaller{c: paymentsv1connect.NewPaymentsServiceClient(h2c(), url,
		append([]connect.ClientOption{connect.WithInterceptors(ic)}, opts...)...), acct: acct}
}

func withAuth[T any](msg *T, acct, key string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+acct)
	if key != "" {
		req.Header().Set(idemconnect.HeaderKey, key)
	}
	return req
}

func (c *connectCaller) charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.Receipt, error) {
	resp, err := c.c.Charge(ctx, withAuth(req, c.acct, ""))
	if err != nil {
		return nil, err
	}
	c.note(resp.Header())
	return resp.Msg, nil
}

func (c *connectCaller) refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundReceipt, error) {
	resp, err := c.c.Refund(ctx, withAuth(req, c.acct, ""))
	if err != nil {
		return nil, err
	}
	c.note(resp.Header())
	return resp.Msg, nil
}

func (c *connectCaller) payout(ctx context.Context, key string, req *paymentsv1.PayoutRequest) (*paymentsv1.PayoutReceipt, error) {
	resp, err := c.c.Payout(ctx, withAuth(req, c.acct, key))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// newUUID4 returns a random UUID4 for an AIP-155 request_id.
func newUUID4() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func chargeReq(i int, requestID bool) *paymentsv1.ChargeRequest {
	req := &paymentsv1.ChargeRequest{AmountCents: int64(100 + i), Currency: "EUR", Description: fmt.Sprintf("intention %d", i),
		Card: &paymentsv1.Card{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030}}
	if requestID {
		req.RequestId = newUUID4()
	}
	return req
}

// figures are what a lossy run saw.
type figures struct {
	intentions, effects       int
	clientRetries             int64 // retries of the idempotency interceptors
	replays                   int64 // answers the callers got marked as replays
	serverCalls, serverOK     int   // calls that reached the server (all attempts, hedges included)
	proxyConns, proxyCuts     int64
	requestIDs, metadataKeyed int
}

// runLossy charges n intentions through c, then refunds half of each
// payment, with 8 callers at a time, and checks that each intention had
// exactly one effect and that each caller got the first answer, as the
// ledger stored it.
func runLossy(t *testing.T, e *env, c caller, n int) figures {
	ctx, cancel := context.WithTimeout(t.Context(), deadline*time.Duration(max(1, n/lossyIntentions)))
	defer cancel()
	receipts := make([]*paymentsv1.Receipt, n)
	refunds := make([]*paymentsv1.RefundReceipt, n)
	var f figures
	each(n, func(i int) {
		var err error
		receipts[i], err = c.charge(ctx, chargeReq(i, i%2 == 0))
		assert.NoError(t, err, "charge %d", i)
	})
	each(n, func(i int) {
		if receipts[i] == nil {
			return
		}
		var err error
		refunds[i], err = c.refund(ctx, &paymentsv1.RefundRequest{PaymentId: receipts[i].GetPaymentId(),
			AmountCents: receipts[i].GetAmountCents() / 2, Reason: "lossy", RequestId: map[bool]string{true: newUUID4()}[i%2 == 1]})
		assert.NoError(t, err, "refund %d", i)
	})
	f.intentions = 2 * n
	f.requestIDs, f.metadataKeyed = n, n
	checkCharges(t, e, receipts)
	checkRefunds(t, e, receipts, refunds)
	f.effects = count(t, e, `SELECT count(*) FROM payments`) + count(t, e, `SELECT count(*) FROM refunds`)
	assert.Equal(t, f.intentions, f.effects, "every intention has exactly one effect")
	f.replays = c.replays()
	return f
}

func each(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func count(t *testing.T, e *env, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// stored returns the responses the ledger stored for method, decoded.
// stored returns the responses the ledger holds for method, decoded as
// the generated wrapper decodes them (idemproto: the messages' binary form).
func stored[R proto.Message](t *testing.T, e *env, method string) []R {
	t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT response FROM idempotency_keys WHERE method = $1 AND status = 'done'`, method)
	require.NoError(t, err)
	defer rows.Close()
	var out []R
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		r, err := idemproto.Decode[R](raw)
		require.NoError(t, err)
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func checkCharges(t *testing.T, e *env, receipts []*paymentsv1.Receipt) {
	t.Helper()
	first := map[int64]*paymentsv1.Receipt{}
	for _, r := range stored[*paymentsv1.Receipt](t, e, "github.com/idemgen/idemgen/example/grpcapi.Payments.Charge") {
		first[r.GetPaymentId()] = r
	}
	assert.Equal(t, len(receipts), len(first), "one stored answer per charge")
	for i, got := range receipts {
		assert.Equal(t, 1, count(t, e, `SELECT count(*) FROM payments WHERE description = $1`, fmt.Sprintf("intention %d", i)),
			"charge %d took effect exactly once", i)
		if got == nil {
			continue
		}
		assert.True(t, proto.Equal(first[got.GetPaymentId()], got), "charge %d: the caller got the first answer\n got %v\nfirst %v", i, got, first[got.GetPaymentId()])
		assert.Equal(t, fmt.Sprintf("intention %d", i), description(t, e, got.GetPaymentId()))
	}
}

func description(t *testing.T, e *env, id int64) string {
	t.Helper()
	var d string
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT description FROM payments WHERE id = $1`, id).Scan(&d))
	return d
}

func checkRefunds(t *testing.T, e *env, receipts []*paymentsv1.Receipt, refunds []*paymentsv1.RefundReceipt) {
	t.Helper()
	first := map[int64]*paymentsv1.RefundReceipt{}
	for _, r := range stored[*paymentsv1.RefundReceipt](t, e, "github.com/idemgen/idemgen/example/grpcapi.Payments.Refund") {
		first[r.GetRefundId()] = r
	}
	assert.Equal(t, len(refunds), len(first), "one stored answer per refund")
	for i, got := range refunds {
		if receipts[i] == nil || got == nil {
			continue
		}
		id := receipts[i].GetPaymentId()
		assert.Equal(t, 1, count(t, e, `SELECT count(*) FROM refunds WHERE payment_id = $1`, id), "refund %d took effect exactly once", i)
		assert.Equal(t, receipts[i].GetAmountCents()/2, int64(count(t, e, `SELECT refunded_cents FROM payments WHERE id = $1`, id)))
		assert.True(t, proto.Equal(first[got.GetRefundId()], got), "refund %d: the caller got the first answer", i)
	}
}

// lossyIntentions is the number of charges of a lossy run (each is then
// refunded: twice as many intentions); lossRate the share of server chunks
// (responses, settings, pings) the proxy loses, resetting the connection.
const (
	lossyIntentions = 100
	lossRate        = 0.05
)

// lossyLong runs the lossy tests with 5,000 charges (10,000 intentions),
// for histories of more than 10,000 attempts.
var lossyLong = flag.Bool("lossy.long", false, "run the lossy tests with 5,000 charges and their refunds instead of 100")

// lossyCount is the number of charges of a lossy run.
func lossyCount() int {
	if *lossyLong {
		return 5000
	}
	return lossyIntentions
}

func TestLossyGRPC(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t, e.grpcAddr, lossRate)
	var retries atomic.Int64
	rec := linear.NewRecorder()
	f := runLossy(t, e, newGRPCCaller(t, p.addr(), "acct_grpc", &retries, rec), lossyCount())
	f.clientRetries = retries.Load()
	f.serverCalls, f.serverOK = e.serverCalls.total()
	f.proxyConns, f.proxyCuts = p.conns.Load(), p.cuts.Load()
	report(t, "grpc-go (retryPolicy; Charge hedged)", f)
	checkHistory(t, e, "lossy proxy, grpc-go", rec)
}

func TestLossyConnect(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t, e.connectAddr(), lossRate)
	var retries atomic.Int64
	rec := linear.NewRecorder()
	f := runLossy(t, e, newConnectCaller("http://"+p.addr(), "acct_connect", &retries,
		connect.WithInterceptors(recordConnect(rec))), lossyCount())
	f.clientRetries = retries.Load()
	f.serverCalls, f.serverOK = e.connectCalls.total()
	f.proxyConns, f.proxyCuts = p.conns.Load(), p.cuts.Load()
	report(t, "connect-go over h2c", f)
	checkHistory(t, e, "lossy proxy, connect-go", rec)
}

// report logs the figures and checks that the run was lossy: answers were
// lost, and the callers retried.
func report(t *testing.T, name string, f figures) {
	t.Logf("%s: intentions %d (charges with request_id %d, keyed by the interceptor %d), effects %d, "+
		"answers that were replays %d, interceptor retries %d, calls reaching the server %d (%d OK), proxy connections %d, connections cut %d",
		name, f.intentions, f.requestIDs, f.metadataKeyed, f.effects, f.replays, f.clientRetries, f.serverCalls, f.serverOK, f.proxyConns, f.proxyCuts)
	assert.Positive(t, f.proxyCuts, "the proxy cut connections")
	assert.Greater(t, f.serverCalls, f.intentions, "answers were lost and calls sent again")
}
