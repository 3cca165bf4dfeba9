package idemgrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// errorInfos returns the google.rpc.ErrorInfo details of err's status.
func errorInfos(err error) []*errdetails.ErrorInfo {
	var infos []*errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, ei)
		}
	}
	return infos
}

// TestErrorInfoTellsTheLedgersAnswersFromTheServices sends each refusal
// over the wire: every one carries one ErrorInfo in the project's domain,
// without metadata and without the key; the service's own status with the
// same code carries none.
func TestErrorInfoTellsTheLedgersAnswersFromTheServices(t *testing.T) {
	s, cc := start(t)
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "key-secret-1", newReq("", 500))
	require.NoError(t, err)

	_, _, mismatch := call(t.Context(), cc, "Charge", "acct_1", "key-secret-1", newReq("", 999))
	_, _, mismatchByID := call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 500))
	_, _, mismatchByID2 := call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 501))
	_, _, noKey := call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
	_, _, badKey := call(t.Context(), cc, "Charge", "acct_1", strings.Repeat("s", 256), newReq("", 500))
	_, _, noScope := call(t.Context(), cc, "Charge", "", "key-secret-2", newReq("", 500))
	require.NoError(t, mismatchByID, "the first use of the request_id")
	for _, tc := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{mismatch, codes.FailedPrecondition, "IDEMPOTENCY_KEY_REUSED"},
		{mismatchByID2, codes.FailedPrecondition, "IDEMPOTENCY_KEY_REUSED"},
		{noKey, codes.InvalidArgument, "IDEMPOTENCY_KEY_MISSING"},
		{badKey, codes.InvalidArgument, "IDEMPOTENCY_KEY_INVALID"},
		{noScope, codes.PermissionDenied, "IDEMPOTENCY_SCOPE_UNKNOWN"},
	} {
		st := status.Convert(tc.err)
		assert.Equal(t, tc.code, st.Code(), "%v", tc.err)
		infos := errorInfos(tc.err)
		require.Len(t, infos, 1, "%v", tc.err)
		assert.Equal(t, tc.reason, infos[0].GetReason())
		assert.Equal(t, idem.ErrorDomain, infos[0].GetDomain())
		assert.Empty(t, infos[0].GetMetadata(), "nothing about the key or the request")
		assert.Equal(t, tc.reason, idemgrpc.ErrorReason(st))
		assert.NotContains(t, st.Message(), "secret")
		assert.NotContains(t, st.Message(), uuid4)
		_, hinted := idemgrpc.RetryDelay(st)
		assert.False(t, hinted, "%s is not retried", tc.reason)
	}

	s.fail = func(context.Context, int64) error { return status.Error(codes.FailedPrecondition, "card declined") }
	_, _, own := call(t.Context(), cc, "Charge", "acct_1", "key-secret-3", newReq("", 500))
	assert.Equal(t, codes.FailedPrecondition, status.Code(own))
	assert.Empty(t, errorInfos(own), "the service's own FailedPrecondition")
	assert.Empty(t, idemgrpc.ErrorReason(status.Convert(own)))
	assert.Equal(t, 2, s.count(t))
}

func TestInProgressCarriesRetryInfoAndErrorInfo(t *testing.T) {
	s, cc := start(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := call(context.WithoutCancel(t.Context()), cc, "Payout", "acct_1", "po-1", newReq("", 700))
		done <- err
	}()
	<-s.started
	_, _, err := call(t.Context(), cc, "Payout", "acct_1", "po-1", newReq("", 700))
	close(s.release)
	require.NoError(t, <-done)
	st := status.Convert(err)
	assert.Equal(t, codes.Aborted, st.Code())
	d, ok := idemgrpc.RetryDelay(st)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, d, time.Second)
	assert.Equal(t, "IDEMPOTENCY_KEY_IN_PROGRESS", idemgrpc.ErrorReason(st))
}

// TestRequestIDFormatIsTheServersSetting: a UUID4 by default, as AIP-155
// asks, and the refusal names what this server requires; a server may
// accept any UUID, or any key its policy accepts.
func TestRequestIDFormatIsTheServersSetting(t *testing.T) {
	const (
		ulid   = "01JEQ5X3V1K9N8M7P6Q5R4S3T2"
		uuidv7 = "01939d4e-7c2a-7b3c-9d4e-5f6a7b8c9d0e"
	)
	for _, tc := range []struct {
		name     string
		format   idem.RequestIDFormat
		accepted []string
		refused  []string
		says     string
	}{
		{"UUID4", idem.RequestIDUUID4, []string{uuid4}, []string{ulid, uuidv7}, "is not a UUID4 (36 characters, version 4, the nil UUID refused), the format this server requires"},
		{"UUID", idem.RequestIDUUID, []string{uuid4, uuidv7}, []string{ulid, "ffffffff-ffff-ffff-ffff-ffffffffffff"}, "is not a UUID (36 characters, any version, the nil and max UUIDs refused), the format this server requires"},
		{"key", idem.RequestIDKey, []string{uuid4, uuidv7, ulid}, []string{strings.Repeat("x", 256)}, "field request_id: 256 bytes, longer than 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, cc := serve(t, false, idemgrpc.ServerConfig{Scope: bearerScope, RequestID: tc.format})
			for i, id := range tc.accepted {
				first, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(id, int64(100+i)))
				require.NoError(t, err, id)
				again, h, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(id, int64(100+i)))
				require.NoError(t, err, id)
				assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed), id)
				assert.Equal(t, paymentID(first), paymentID(again), id)
			}
			for _, id := range tc.refused {
				_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(id, 100))
				st := status.Convert(err)
				assert.Equal(t, codes.InvalidArgument, st.Code(), id)
				assert.Contains(t, st.Message(), tc.says, id)
				assert.NotContains(t, st.Message(), "AIP-155", "what this server requires, not what AIP-155 does")
				assert.Equal(t, "IDEMPOTENCY_KEY_INVALID", idemgrpc.ErrorReason(st))
			}
			assert.Equal(t, len(tc.accepted), s.count(t), "one payment per accepted request_id")
			assert.Equal(t, int64(2*len(tc.accepted)), s.attempts.Load(), "a refused request_id never reaches the handler")
		})
	}
}

// TestRequestIDAndMetadataMustAgree: both may be sent when they name the
// same key; a UUID compares in any case, a key in the key format as sent.
func TestRequestIDAndMetadataMustAgree(t *testing.T) {
	_, cc := serve(t, false, idemgrpc.ServerConfig{Scope: bearerScope, RequestID: idem.RequestIDKey})
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "Key-1", newReq("Key-1", 100))
	require.NoError(t, err)
	_, _, err = call(t.Context(), cc, "Charge", "acct_1", "key-1", newReq("Key-1", 100))
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "metadata idempotency-key and field request_id name different keys")

	_, cc = start(t)
	_, _, err = call(t.Context(), cc, "Charge", "acct_1", strings.ToUpper(uuid4), newReq(uuid4, 100))
	require.NoError(t, err, "a UUID in another case is the same UUID")
}

// TestClientLeavesARequestIDAlone: the client interceptor adds no metadata
// key to a request that carries a request_id, whatever its format (the
// server judges it), so a server that accepts non-UUID request_ids works
// with it.
func TestClientLeavesARequestIDAlone(t *testing.T) {
	var retries int
	s, cc := serve(t, false, idemgrpc.ServerConfig{Scope: bearerScope, RequestID: idem.RequestIDKey}, fastClient(&retries))
	var k keys
	s.fail = func(ctx context.Context, _ int64) error { k.record(ctx); return nil }
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("order-77", 100))
	require.NoError(t, err)
	_, h, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("order-77", 100))
	require.NoError(t, err)
	assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))
	assert.Equal(t, [][]string{nil, nil}, k.all(), "no metadata key was added")
}

func TestServerInterceptorRefusesAnUnknownRequestIDFormat(t *testing.T) {
	assert.Panics(t, func() {
		idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{SingleTenant: true, RequestID: idem.RequestIDFormat(9)})
	})
}
