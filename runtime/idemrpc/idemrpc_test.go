package idemrpc_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemrpc"
)

func TestFor(t *testing.T) {
	n := idemrpc.Names{Call: "method", Key: "metadata idempotency-key"}
	for _, tc := range []struct {
		err   error
		code  idemrpc.Code
		delay time.Duration
	}{
		{fmt.Errorf("Charge: %w", &idem.MismatchError{Key: "secret-key", Stored: []byte{1}, Got: []byte{2}}), idemrpc.FailedPrecondition, 0},
		{&idem.InProgressError{Key: "secret-key", RetryAfter: 3 * time.Second}, idemrpc.Aborted, 3 * time.Second},
		{idem.ErrLockLost, idemrpc.Aborted, time.Second},
		{&idem.KeyError{Reason: "empty"}, idemrpc.InvalidArgument, 0},
		{idem.ErrNoKey, idemrpc.InvalidArgument, 0},
		{&idem.ScopeError{Reason: "not valid UTF-8"}, idemrpc.PermissionDenied, 0},
		{idem.ErrOutcomeNotRecorded, idemrpc.Internal, 0},
		{fmt.Errorf("%w: dial: secret-host refused", idem.ErrStore), idemrpc.Unavailable, 0},
	} {
		a, ok := idemrpc.For(tc.err, n)
		require.True(t, ok, "%v", tc.err)
		assert.Equal(t, tc.code, a.Code, "%v", tc.err)
		assert.Equal(t, tc.delay, a.RetryDelay, "%v", tc.err)
		assert.Equal(t, idem.Classify(tc.err).Kind.Reason(), a.Reason)
		assert.NotEmpty(t, a.Reason)
		assert.NotContains(t, a.Message, "secret")
		assert.NotContains(t, a.Message, "{")
	}
	a, _ := idemrpc.For(idem.ErrNoKey, n)
	assert.Equal(t, "this method is idempotent and requires an idempotency key: send metadata idempotency-key "+
		"(or the request's request_id field) with a new unique key per request, the same key on retries", a.Message)
	a, _ = idemrpc.For(&idem.KeyError{Reason: "byte 2 (0x0a) is not a visible ASCII character"}, n)
	assert.Equal(t, "idempotency key is malformed: byte 2 (0x0a) is not a visible ASCII character", a.Message)

	for _, err := range []error{nil, errors.New("card declined"), &idem.ReplayedError{Name: "ErrCardDeclined", Msg: "card declined"}} {
		_, ok := idemrpc.For(err, n)
		assert.False(t, ok, "%v is the application's", err)
	}
}

func TestScopeUnknown(t *testing.T) {
	a := idemrpc.ScopeUnknown("call")
	assert.Equal(t, idemrpc.PermissionDenied, a.Code)
	assert.Equal(t, "IDEMPOTENCY_SCOPE_UNKNOWN", a.Reason)
	assert.Equal(t, "the account this call belongs to could not be determined, "+
		"so its idempotency key cannot be applied; check the call's credentials", a.Message)
}
