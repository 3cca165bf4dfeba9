package grpcapi_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
	"github.com/idemgen/idemgen/internal/faults/linear"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// The lossy runs record every attempt that goes through the proxy in a
// history (internal/faults/linear), as the fault suite records its calls,
// and check it for linearizability at the end. The recording interceptor is
// the innermost: each attempt of the idempotency interceptor, and each
// hedged copy, is one call of the history, with the key it carried on the
// wire.

// checkTimeout bounds the checker; its histories take milliseconds.
const checkTimeout = time.Minute

// historyKey is the history's key of a request: its intention (a charge's
// description, a refund's payment), which the effects read at the end name
// too. The wire key is part of the fingerprint: an attempt sent under
// another key would be a new intention at the server, and answered fresh.
func historyKey(req any) (string, bool) {
	switch r := req.(type) {
	case *paymentsv1.ChargeRequest:
		return "Charge " + r.GetDescription(), true
	case *paymentsv1.RefundRequest:
		return fmt.Sprintf("Refund of payment %d", r.GetPaymentId()), true
	}
	return "", false
}

// historyInput is the history's input of an attempt of req sent with the
// idempotency key wireKey ("" when the request's request_id is the key).
func historyInput(req proto.Message, wireKey string) (linear.Input, bool) {
	key, ok := historyKey(req)
	if !ok {
		return linear.Input{}, false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return linear.Input{}, false
	}
	return linear.Input{Key: key, Fingerprint: fmt.Sprintf("%s %x", wireKey, sha256.Sum256(b))}, true
}

// renderAnswer renders an answer as the effect it names (renderPayment,
// renderRefund).
func renderAnswer(resp any) string {
	switch r := resp.(type) {
	case *paymentsv1.Receipt:
		return renderPayment(r.GetPaymentId(), r.GetAmountCents(), r.GetCurrency())
	case *paymentsv1.RefundReceipt:
		return renderRefund(r.GetRefundId(), r.GetPaymentId(), r.GetAmountCents())
	}
	return fmt.Sprint(resp)
}

func renderPayment(id, cents int64, currency string) string {
	return fmt.Sprintf("payment %d: %d %s", id, cents, currency)
}

func renderRefund(id, payment, cents int64) string {
	return fmt.Sprintf("refund %d of payment %d: %d", id, payment, cents)
}

// errAnswer classifies an attempt's error by the ErrorInfo reason the
// server put in it: an in-progress answer, a mismatch, or else an error
// whose outcome the caller cannot know (a cut connection, a deadline, a
// hedged copy cancelled, an unavailable ledger). The proxy cuts the link
// between client and server only, so no answer here is an outcome stored as
// unknown; were one, it would count as unknown too, which the model allows.
func errAnswer(reason string) linear.Output {
	switch reason {
	case idem.KindInProgress.Reason():
		return linear.Output{Answer: linear.InProgress}
	case idem.KindMismatch.Reason():
		return linear.Output{Answer: linear.Mismatch}
	}
	return linear.Output{Answer: linear.Unknown}
}

// recordGRPC is a client interceptor recording each attempt in rec. grpc-go
// sends an attempt again inside one invocation (the service config's
// retryPolicy) when the connection is cut: a replay it answers may be the
// commit of its own earlier try, so every answer is marked as one whose
// body may have run (linear.Output.Ran).
func recordGRPC(rec *linear.Recorder) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var wireKey string
		if md, ok := metadata.FromOutgoingContext(ctx); ok {
			if v := md.Get(idemgrpc.DefaultMetadataKey); len(v) > 0 {
				wireKey = v[len(v)-1]
			}
		}
		in, ok := historyInput(req.(proto.Message), wireKey)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		var header metadata.MD
		call := rec.Begin(in)
		err := invoker(ctx, method, req, reply, cc, append(slices.Clip(opts), grpc.Header(&header))...)
		if err != nil {
			st, _ := status.FromError(err)
			call.End(errAnswer(idemgrpc.ErrorReason(st)))
			return err
		}
		replayed := len(header.Get(idemgrpc.MetadataReplayed)) == 1 && header.Get(idemgrpc.MetadataReplayed)[0] == "true"
		call.End(linear.Output{Answer: linear.Value, Value: renderAnswer(reply), Replayed: replayed, Ran: true})
		return nil
	}
}

// recordConnect is a client interceptor recording each attempt in rec.
// connect-go sends each attempt once: a replay is another attempt's commit.
func recordConnect(rec *linear.Recorder) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			in, ok := historyInput(req.Any().(proto.Message), req.Header().Get(idemconnect.HeaderKey))
			if !ok {
				return next(ctx, req)
			}
			call := rec.Begin(in)
			resp, err := next(ctx, req)
			if err != nil {
				call.End(errAnswer(idemconnect.ErrorReason(err)))
				return resp, err
			}
			call.End(linear.Output{Answer: linear.Value, Value: renderAnswer(resp.Any()),
				Replayed: resp.Header().Get(idemconnect.HeaderReplayed) == "true"})
			return resp, nil
		}
	}
}

// effects reads the payments and refunds at the end, by history key.
func effects(t *testing.T, e *env) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	rows, err := e.db.Pool.Query(ctx, `SELECT id, amount_cents, currency, description FROM payments`)
	require.NoError(t, err)
	for rows.Next() {
		var id, cents int64
		var currency, description string
		require.NoError(t, rows.Scan(&id, &cents, &currency, &description))
		key := "Charge " + description
		out[key] = append(out[key], renderPayment(id, cents, currency))
	}
	require.NoError(t, rows.Err())
	rows, err = e.db.Pool.Query(ctx, `SELECT id, payment_id, amount_cents FROM refunds`)
	require.NoError(t, err)
	for rows.Next() {
		var id, payment, cents int64
		require.NoError(t, rows.Scan(&id, &payment, &cents))
		key := fmt.Sprintf("Refund of payment %d", payment)
		out[key] = append(out[key], renderRefund(id, payment, cents))
	}
	require.NoError(t, rows.Err())
	return out
}

// checkHistory reads the effects into rec and checks its history: the run
// fails, naming porcupine's picture of the failing keys, if it is not
// linearizable. It then proves the check can fail on this very history:
// the same calls, with one more answered as a replay of another key's
// value, must be reported not linearizable, with a picture.
func checkHistory(t *testing.T, e *env, name string, rec *linear.Recorder) {
	t.Helper()
	found := effects(t, e)
	forged, err := rec.ForgeReplay()
	require.NoError(t, err)
	rec.Observe(found)
	res, err := linear.Check(name, rec.History(), "", checkTimeout)
	require.NoError(t, err)
	t.Logf("%s: %s (%d calls)", name, res, rec.Calls())
	assert.NoError(t, res.Err(), "%s", name)

	forged.Observe(found)
	bad, err := linear.Check(name+" with a forged replay", forged.History(), t.TempDir(), checkTimeout)
	require.NoError(t, err)
	require.Error(t, bad.Err(), "a replay of another key's value is not linearizable")
	t.Logf("%s with a forged replay: %s: %v", name, bad, bad.Err())
	assert.Regexp(t, `^not linearizable: 1 of \d+ keys`, bad.Err().Error(), "only the forged call's key")
	assert.FileExists(t, bad.Picture)
}
