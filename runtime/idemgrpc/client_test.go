package idemgrpc_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// keys records the metadata key of every attempt that reached Charge.
// It also records whether each was marked a possible retry
// (idem.RetryFrom).
type keys struct {
	mu     sync.Mutex
	seen   [][]string
	marked []bool
}

func (k *keys) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = append(k.seen, md.Get(idemgrpc.DefaultMetadataKey))
	k.marked = append(k.marked, idem.RetryFrom(ctx))
}

func (k *keys) marks() []bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]bool(nil), k.marked...)
}

func (k *keys) all() [][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([][]string(nil), k.seen...)
}

func fastClient(retries *int) grpc.DialOption {
	return grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{
		BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
		OnRetry: func(string, int, error) { *retries++ },
	}))
}

func TestClientKeepsOneKeyAcrossItsRetries(t *testing.T) {
	var retries int
	s, cc := start(t, fastClient(&retries))
	var k keys
	s.fail = func(ctx context.Context, n int64) error {
		k.record(ctx)
		if n <= 2 {
			return status.Error(codes.Unavailable, "try again")
		}
		return nil
	}
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
	require.NoError(t, err)
	seen := k.all()
	require.Len(t, seen, 3)
	require.Len(t, seen[0], 1, "the interceptor gave the call a key")
	assert.NotEmpty(t, seen[0][0])
	assert.Equal(t, seen[0], seen[1])
	assert.Equal(t, seen[0], seen[2], "every attempt carries the same key")
	assert.Equal(t, []bool{false, true, true}, k.marks(), "the interceptor's retries are marked retries on the server")
	assert.Equal(t, 2, retries)
	assert.Equal(t, 1, s.count(t))

	_, _, err = call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
	require.NoError(t, err)
	assert.NotEqual(t, seen[0], k.all()[3], "a new call is a new intention with a new key")
	assert.Equal(t, 2, s.count(t))
}

func TestClientKeepsTheCallersKeyAndRequestID(t *testing.T) {
	var retries int
	s, cc := start(t, fastClient(&retries))
	var k keys
	s.fail = func(ctx context.Context, _ int64) error { k.record(ctx); return nil }
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "mine", newReq("", 500))
	require.NoError(t, err)
	_, _, err = call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 501))
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"mine"}, nil}, k.all(), "a request_id is the key: no metadata key is added")
}

func TestClientRetriesOnlyWhatItShould(t *testing.T) {
	retryInfo := func(d time.Duration) error {
		st, err := status.New(codes.Aborted, "in progress").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			return err
		}
		return st.Err()
	}
	for _, tc := range []struct {
		name     string
		err      error
		attempts int64
	}{
		{"aborted with RetryInfo", retryInfo(time.Millisecond), 5},
		{"unavailable", status.Error(codes.Unavailable, "down"), 5},
		{"aborted without RetryInfo", status.Error(codes.Aborted, "conflict"), 1},
		{"invalid argument", status.Error(codes.InvalidArgument, "bad"), 1},
		{"mismatch", idemgrpc.Error(idem.ErrMismatch), 1},
		{"outcome unknown", idemgrpc.Error(idem.ErrOutcomeNotRecorded), 1},
		// The handler's own error arrives as a status with codes.Unknown,
		// here with the very text of grpc-go's transport EOF: an answer,
		// not retried.
		{"the handler's own Unknown", io.EOF, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var retries int
			s, cc := start(t, fastClient(&retries))
			s.fail = func(context.Context, int64) error { return tc.err }
			_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
			assert.Equal(t, status.Code(tc.err), status.Code(err))
			assert.Equal(t, tc.attempts, s.attempts.Load(), "attempts (MaxAttempts is 5)")
		})
	}
}

func TestClientNeverWaitsPastTheDeadline(t *testing.T) {
	var retries int
	s, cc := start(t, fastClient(&retries))
	st, err := status.New(codes.Aborted, "in progress").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Second)})
	require.NoError(t, err)
	s.fail = func(context.Context, int64) error { return st.Err() }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _, err = call(ctx, cc, "Charge", "acct_1", "", newReq("", 500))
	assert.Equal(t, codes.Aborted, status.Code(err), "the last answer, not a deadline error")
	assert.Equal(t, int64(1), s.attempts.Load(), "a retry 20s away is past the 10s deadline: not made")
	assert.Zero(t, retries)
}

// TestKeyTravelsWithServiceConfigRetries lets grpc-go itself retry (a
// retryPolicy of the service config) while the interceptor makes a single
// attempt: every attempt that reaches the server carries the key the
// interceptor gave the call.
func TestKeyTravelsWithServiceConfigRetries(t *testing.T) {
	config := `{"methodConfig": [{"name": [{"service": "` + service + `"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.01s", "backoffMultiplier": 2,
			"retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	s, cc := start(t, grpc.WithDefaultServiceConfig(config),
		grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{MaxAttempts: 1})))
	var k keys
	s.fail = func(ctx context.Context, n int64) error {
		k.record(ctx)
		if n <= 2 {
			return status.Error(codes.Unavailable, "try again")
		}
		return nil
	}
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
	require.NoError(t, err)
	seen := k.all()
	require.Len(t, seen, 3, "grpc-go made three attempts")
	require.Len(t, seen[0], 1)
	assert.Equal(t, [][]string{seen[0], seen[0], seen[0]}, seen, "each carries the one key")
	assert.Equal(t, []bool{false, true, true}, k.marks(), "grpc-previous-rpc-attempts marks grpc-go's retries on the server")
	assert.Equal(t, 1, s.count(t))
}
