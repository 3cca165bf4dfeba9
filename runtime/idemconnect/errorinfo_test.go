package idemconnect_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemrpc"
)

// errorInfo returns the google.rpc.ErrorInfo details of err.
func errorInfo(t *testing.T, err error) []*errdetails.ErrorInfo {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	var infos []*errdetails.ErrorInfo
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if ei, ok := v.(*errdetails.ErrorInfo); ok {
			infos = append(infos, ei)
		}
	}
	return infos
}

// TestErrorInfoTellsTheLedgersAnswersFromTheServices sends each refusal
// over the wire: every one carries one ErrorInfo in the project's domain,
// without metadata and without the key; the service's own error with the
// same code carries none.
func TestErrorInfoTellsTheLedgersAnswersFromTheServices(t *testing.T) {
	s := start(t)
	c := s.client("Charge")
	_, err := send(t.Context(), c, "acct_1", "key-secret-1", 500)
	require.NoError(t, err)

	_, mismatch := send(t.Context(), c, "acct_1", "key-secret-1", 999)
	_, noKey := send(t.Context(), c, "acct_1", "", 500)
	_, badKey := send(t.Context(), c, "acct_1", "key\tsecret", 500)
	_, noScope := send(t.Context(), c, "", "key-secret-2", 500)
	for _, tc := range []struct {
		err    error
		code   connect.Code
		reason string
	}{
		{mismatch, connect.CodeFailedPrecondition, "IDEMPOTENCY_KEY_REUSED"},
		{noKey, connect.CodeInvalidArgument, "IDEMPOTENCY_KEY_MISSING"},
		{badKey, connect.CodeInvalidArgument, "IDEMPOTENCY_KEY_INVALID"},
		{noScope, connect.CodePermissionDenied, "IDEMPOTENCY_SCOPE_UNKNOWN"},
	} {
		assert.Equal(t, tc.code, connect.CodeOf(tc.err), "%v", tc.err)
		infos := errorInfo(t, tc.err)
		require.Len(t, infos, 1, "%v", tc.err)
		assert.Equal(t, tc.reason, infos[0].GetReason())
		assert.Equal(t, idem.ErrorDomain, infos[0].GetDomain())
		assert.Empty(t, infos[0].GetMetadata(), "nothing about the key or the request")
		assert.Equal(t, tc.reason, idemconnect.ErrorReason(tc.err))
		assert.NotContains(t, tc.err.Error(), "secret")
	}
	_, hinted := idemconnect.RetryDelay(mismatch)
	assert.False(t, hinted, "a mismatch is not retried")

	s.fail = func(int64) error {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("card declined"))
	}
	_, own := send(t.Context(), c, "acct_1", "key-secret-3", 500)
	assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(own))
	assert.Empty(t, errorInfo(t, own), "the service's own FailedPrecondition")
	assert.Empty(t, idemconnect.ErrorReason(own))
	assert.Equal(t, 1, s.count(t))
}

func TestInProgressCarriesRetryInfoAndErrorInfo(t *testing.T) {
	s := start(t)
	c := s.client("Payout")
	done := make(chan error, 1)
	go func() {
		_, err := send(context.WithoutCancel(t.Context()), c, "acct_1", "po-1", 700)
		done <- err
	}()
	<-s.started
	_, err := send(t.Context(), c, "acct_1", "po-1", 700)
	close(s.release)
	require.NoError(t, <-done)
	assert.Equal(t, connect.CodeAborted, connect.CodeOf(err))
	d, ok := idemconnect.RetryDelay(err)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, d, time.Second)
	assert.Equal(t, "IDEMPOTENCY_KEY_IN_PROGRESS", idemconnect.ErrorReason(err))
}

func sendByID(ctx context.Context, c *connect.Client[byID, out], key, requestID, amount string) (*connect.Response[out], error) {
	req := connect.NewRequest(&byID{RequestId: requestID, ServingData: amount})
	req.Header().Set("Authorization", "Bearer acct_1")
	if key != "" {
		req.Header().Set(idemconnect.HeaderKey, key)
	}
	return c.CallUnary(ctx, req)
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
		{"UUID", idem.RequestIDUUID, []string{uuid4, uuidv7}, []string{ulid, "00000000-0000-0000-0000-000000000000"}, "is not a UUID (36 characters, any version, the nil and max UUIDs refused), the format this server requires"},
		{"key", idem.RequestIDKey, []string{uuid4, uuidv7, ulid}, []string{"has space"}, "field request_id: byte 4 (0x20) is not a visible ASCII character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, false, idemconnect.HandlerConfig{Scope: bearerScope, RequestID: tc.format})
			c := connect.NewClient[byID, out](http.DefaultClient, s.url+"/test.Payments/ChargeByID")
			for i, id := range tc.accepted {
				first, err := sendByID(t.Context(), c, "", id, strconv.Itoa(100+i))
				require.NoError(t, err, id)
				again, err := sendByID(t.Context(), c, "", id, strconv.Itoa(100+i))
				require.NoError(t, err, id)
				assert.Equal(t, "true", again.Header().Get(idemconnect.HeaderReplayed), id)
				assert.Equal(t, first.Msg.GetValue(), again.Msg.GetValue(), id)
			}
			for _, id := range tc.refused {
				_, err := sendByID(t.Context(), c, "", id, "100")
				assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), id)
				assert.Contains(t, err.Error(), tc.says, id)
				assert.NotContains(t, err.Error(), "AIP-155", "what this server requires, not what AIP-155 does")
				assert.Equal(t, "IDEMPOTENCY_KEY_INVALID", idemconnect.ErrorReason(err))
			}
			assert.Equal(t, len(tc.accepted), s.count(t), "one payment per accepted request_id")
		})
	}
}

// TestRequestIDAndHeaderMustAgree: both may be sent when they name the
// same key; a UUID compares in any case, a key in the key format as sent.
func TestRequestIDAndHeaderMustAgree(t *testing.T) {
	s := serve(t, false, idemconnect.HandlerConfig{Scope: bearerScope, RequestID: idem.RequestIDKey})
	c := connect.NewClient[byID, out](http.DefaultClient, s.url+"/test.Payments/ChargeByID")
	_, err := sendByID(t.Context(), c, "Key-1", "Key-1", "100")
	require.NoError(t, err)
	_, err = sendByID(t.Context(), c, "key-1", "Key-1", "100")
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	assert.Contains(t, err.Error(), "the Idempotency-Key header and field request_id name different keys")

	s = start(t)
	c = connect.NewClient[byID, out](http.DefaultClient, s.url+"/test.Payments/ChargeByID")
	_, err = sendByID(t.Context(), c, strings.ToUpper(uuid4), uuid4, "100")
	require.NoError(t, err, "a UUID in another case is the same UUID")
}

// TestClientLeavesARequestIDAlone: the client interceptor adds no header
// key to a request that carries a request_id, whatever its format (the
// server judges it): a server that accepts non-UUID request_ids works with
// it, and one that does not refuses the request_id rather than seeing two
// different keys.
func TestClientLeavesARequestIDAlone(t *testing.T) {
	s := serve(t, false, idemconnect.HandlerConfig{Scope: bearerScope, RequestID: idem.RequestIDKey})
	c := connect.NewClient[byID, out](http.DefaultClient, s.url+"/test.Payments/ChargeByID",
		connect.WithInterceptors(idemconnect.NewClientInterceptor(idemconnect.ClientConfig{})))
	_, err := sendByID(t.Context(), c, "", "order-77", "100")
	require.NoError(t, err)
	again, err := sendByID(t.Context(), c, "", "order-77", "100")
	require.NoError(t, err)
	assert.Equal(t, "true", again.Header().Get(idemconnect.HeaderReplayed))
	s.mu.Lock()
	assert.Equal(t, []string{"", ""}, s.keys, "no Idempotency-Key header was added")
	s.mu.Unlock()
}

// TestRPCCodesAreConnects: runtime/idemrpc's codes, which do not import
// connect-go, are connect-go's numbers.
func TestRPCCodesAreConnects(t *testing.T) {
	for rpc, c := range map[idemrpc.Code]connect.Code{
		idemrpc.InvalidArgument: connect.CodeInvalidArgument, idemrpc.PermissionDenied: connect.CodePermissionDenied,
		idemrpc.FailedPrecondition: connect.CodeFailedPrecondition, idemrpc.Aborted: connect.CodeAborted,
		idemrpc.Internal: connect.CodeInternal, idemrpc.Unavailable: connect.CodeUnavailable,
	} {
		assert.Equal(t, c, connect.Code(rpc), c.String())
	}
}
