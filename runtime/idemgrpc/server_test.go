package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemgrpc"
	"github.com/idemgen/idemgen/runtime/idemrpc"
)

const uuid4 = "0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5c"

func TestReplayOverGRPC(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc, cc *grpc.ClientConn) {

		first, h1, err := call(t.Context(), cc, "Charge", "acct_1", "ch-1", newReq("", 500))
		require.NoError(t, err)
		assert.Empty(t, h1.Get(idemgrpc.MetadataReplayed), "the first response is not a replay")
		assert.Equal(t, []string{"86400"}, h1.Get(idemgrpc.MetadataRetention), "the store's default retention, 24h")

		// A retry, marked as the client interceptor marks its own: the
		// server looks the key up before the body runs.
		retry := metadata.AppendToOutgoingContext(t.Context(), idemgrpc.PreviousAttemptsMetadataKey, "1")
		again, h2, err := call(retry, cc, "Charge", "acct_1", "ch-1", newReq("", 500))
		require.NoError(t, err)
		assert.Equal(t, []string{"true"}, h2.Get(idemgrpc.MetadataReplayed))
		assert.Equal(t, []string{"86400"}, h2.Get(idemgrpc.MetadataRetention))
		assert.Equal(t, paymentID(first), paymentID(again), "the replay is the first answer")

		other, h3, err := call(t.Context(), cc, "Charge", "acct_2", "ch-1", newReq("", 500))
		require.NoError(t, err, "the same key in another scope is another request")
		assert.Empty(t, h3.Get(idemgrpc.MetadataReplayed))
		assert.NotEqual(t, paymentID(first), paymentID(other))

		assert.Equal(t, 2, s.count(t))
		assert.Equal(t, int64(2), s.executed.Load())
	})
}

func TestRequestIDWorksAsMetadataKey(t *testing.T) {
	s, cc := start(t)
	first, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 500))
	require.NoError(t, err)
	again, h, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 500))
	require.NoError(t, err)
	assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))
	assert.Equal(t, paymentID(first), paymentID(again))

	byMD, h, err := call(t.Context(), cc, "Charge", "acct_1", uuid4, newReq("", 500))
	require.NoError(t, err, "the request_id and the same metadata key are one key")
	assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))
	assert.Equal(t, paymentID(first), paymentID(byMD))

	_, _, err = call(t.Context(), cc, "Charge", "acct_1", "", newReq(uuid4, 501))
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "a request_id reused with another request is a mismatch: %v", err)
	assert.Equal(t, 1, s.count(t))
}

func TestRequestIDValidatedAsAIP155Says(t *testing.T) {
	s, cc := start(t)
	for _, id := range []string{
		"00000000-0000-0000-0000-000000000000", // nil UUID
		"0b6f1e0c-5a4e-1f3b-9d2a-7c1e2f3a4b5c", // version 1
		"0b6f1e0c-5a4e-4f3b-7d2a-7c1e2f3a4b5c", // wrong variant
		"0b6f1e0c5a4e4f3b9d2a7c1e2f3a4b5c",     // no hyphens
		"0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5g", // not hex
	} {
		_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq(id, 500))
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", id, err)
	}
	_, _, err := call(t.Context(), cc, "Charge", "acct_1", "other-key", newReq(uuid4, 500))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "metadata and request_id disagree: %v", err)
	assert.Equal(t, 0, s.count(t))
	assert.Zero(t, s.attempts.Load(), "refused before the handler")
}

func TestErrorsAsCodes(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc, cc *grpc.ClientConn) {
		_, _, err := call(t.Context(), cc, "Charge", "acct_1", "", newReq("", 500))
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "missing key: %v", err)

		_, _, err = call(t.Context(), cc, "Charge", "acct_1", strings.Repeat("k", 256), newReq("", 500))
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "malformed key: %v", err)

		_, _, err = call(t.Context(), cc, "Charge", "", "k1", newReq("", 500))
		assert.Equal(t, codes.PermissionDenied, status.Code(err), "no scope: %v", err)

		_, _, err = call(t.Context(), cc, "Charge", "acct_1", "k1", newReq("", 500))
		require.NoError(t, err)
		_, _, err = call(t.Context(), cc, "Charge", "acct_1", "k1", newReq("", 999))
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), "mismatch: %v", err)
		assert.NotContains(t, status.Convert(err).Message(), "k1", "the message does not echo the key")
		assert.Equal(t, 1, s.count(t))
	})
}

func TestTwinGetsAbortedWithRetryInfo(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc, cc *grpc.ClientConn) {
		done := make(chan error, 1)
		go func() {
			_, _, err := call(t.Context(), cc, "Payout", "acct_1", "po-1", newReq("", 700))
			done <- err
		}()
		<-s.started // the first call holds the key
		_, _, err := call(t.Context(), cc, "Payout", "acct_1", "po-1", newReq("", 700))
		st := status.Convert(err)
		assert.Equal(t, codes.Aborted, st.Code(), "twin: %v", err)
		d, ok := idemgrpc.RetryDelay(st)
		assert.True(t, ok, "the in-progress answer carries RetryInfo")
		assert.GreaterOrEqual(t, d, time.Second)
		close(s.release)
		require.NoError(t, <-done)
		_, h, err := call(t.Context(), cc, "Payout", "acct_1", "po-1", newReq("", 700))
		require.NoError(t, err)
		assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))
		assert.Equal(t, int64(1), s.executed.Load())
	})
}

// TestTwinOfAHolderGetsAbortedWithRetryInfo: the first call's atomic body
// holds the seat's row (and the key) and does not end; its twin, whose
// body needs the same row, is answered ABORTED with RetryInfo once Seat's
// claim wait (300 ms) ends, its body having taken no seat, and a retry
// after the first commits replays the first's answer. A twin whose body
// ran would wait on the seat's row, which the first releases only after
// the twin is answered: it would end at its own deadline instead.
func TestTwinOfAHolderGetsAbortedWithRetryInfo(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc, cc *grpc.ClientConn) {
		release := s.seatHold.Release
		t.Cleanup(release) // a failure does not leave the first call holding the row
		type result struct {
			out *dynamicpb.Message
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, _, err := call(t.Context(), cc, "Seat", "acct_1", "seat-1", newReq("", 300))
			done <- result{out, err}
		}()
		<-s.seatHold.Reached()

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, _, err := call(ctx, cc, "Seat", "acct_1", "seat-1", newReq("", 300))
		st := status.Convert(err)
		require.NotEqual(t, codes.DeadlineExceeded, st.Code(), "the twin was not answered while the first call held the seat's row: %v", err)
		require.Equal(t, codes.Aborted, st.Code(), "twin: %v", err)
		d, ok := idemgrpc.RetryDelay(st)
		assert.True(t, ok, "the in-progress answer carries RetryInfo")
		assert.GreaterOrEqual(t, d, time.Second)
		assert.EqualValues(t, 1, s.seatHold.Passed(), "the twin's body took no seat")

		release()
		first := <-done
		require.NoError(t, first.err)
		retry := metadata.AppendToOutgoingContext(t.Context(), idemgrpc.PreviousAttemptsMetadataKey, "1")
		again, h, err := call(retry, cc, "Seat", "acct_1", "seat-1", newReq("", 300))
		require.NoError(t, err)
		assert.Equal(t, []string{"true"}, h.Get(idemgrpc.MetadataReplayed))
		assert.Equal(t, paymentID(first.out), paymentID(again))
		assert.EqualValues(t, 1, s.seatHold.Passed())
		assert.Equal(t, 1, s.count(t), "one payment")
		assert.Equal(t, 1, s.taken(t), "one seat taken")
	})
}

func TestNoSideEffectsMethodPassesThrough(t *testing.T) {
	s, cc := start(t)
	out, h, err := call(t.Context(), cc, "Get", "", "", newReq("", 0))
	require.NoError(t, err, "no key, no scope: the method is not the ledger's")
	assert.Equal(t, int64(7), paymentID(out))
	assert.Empty(t, h.Get(idemgrpc.MetadataRetention))
	_, _, err = call(t.Context(), cc, "Get", "acct_1", "k", newReq("", 0))
	require.NoError(t, err)
	assert.Equal(t, "", <-s.sawKey)
	assert.Equal(t, "", <-s.sawKey, "the key is not put in the context of a NO_SIDE_EFFECTS method")
	assert.True(t, idemgrpc.NoSideEffects("/"+service+"/Get"))
	assert.False(t, idemgrpc.NoSideEffects("/"+service+"/Payout"))
	assert.False(t, idemgrpc.NoSideEffects("/no.such.Service/Get"))
}

func TestServerInterceptorRequiresAScope(t *testing.T) {
	assert.PanicsWithValue(t, idemgrpc.ErrNoScope, func() { idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{}) })
	assert.PanicsWithValue(t, idemgrpc.ErrNoScope, func() {
		idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{Scope: bearerScope, SingleTenant: true})
	})
	assert.NotPanics(t, func() { idemgrpc.UnaryServerInterceptor(idemgrpc.ServerConfig{SingleTenant: true}) })
}

func TestMap(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   codes.Code
		retry  time.Duration
		reason string
	}{
		{&idem.InProgressError{RetryAfter: 2500 * time.Millisecond}, codes.Aborted, 2500 * time.Millisecond, "IDEMPOTENCY_KEY_IN_PROGRESS"},
		{fmt.Errorf("charge: %w", &idem.InProgressError{}), codes.Aborted, time.Second, "IDEMPOTENCY_KEY_IN_PROGRESS"},
		{idem.ErrLockLost, codes.Aborted, time.Second, "IDEMPOTENCY_LOCK_LOST"},
		{&idem.MismatchError{Key: "secret"}, codes.FailedPrecondition, 0, "IDEMPOTENCY_KEY_REUSED"},
		{idem.ErrNoKey, codes.InvalidArgument, 0, "IDEMPOTENCY_KEY_MISSING"},
		{&idem.KeyError{Reason: "too long"}, codes.InvalidArgument, 0, "IDEMPOTENCY_KEY_INVALID"},
		{&idem.ScopeError{Reason: "not UTF-8"}, codes.PermissionDenied, 0, "IDEMPOTENCY_SCOPE_UNKNOWN"},
		{fmt.Errorf("claim: %w", idem.ErrStore), codes.Unavailable, 0, "IDEMPOTENCY_LEDGER_UNAVAILABLE"},
		{idem.ErrOutcomeNotRecorded, codes.Internal, 0, "IDEMPOTENCY_OUTCOME_UNKNOWN"},
		{errors.Join(idem.ErrOutcomeNotRecorded, idem.ErrStore), codes.Unavailable, 0, "IDEMPOTENCY_LEDGER_UNAVAILABLE"},
	} {
		st, ok := idemgrpc.Status(tc.err)
		require.True(t, ok, "%v", tc.err)
		assert.Equal(t, tc.code, st.Code(), "%v", tc.err)
		d, has := idemgrpc.RetryDelay(st)
		assert.Equal(t, tc.retry > 0, has, "%v", tc.err)
		assert.Equal(t, tc.retry, d, "%v", tc.err)
		assert.Equal(t, tc.reason, idemgrpc.ErrorReason(st), "%v", tc.err)
		assert.NotContains(t, st.Message(), "secret")
	}
	_, ok := idemgrpc.Map(errors.New("card declined"))
	assert.False(t, ok, "the application's own errors are its own")
	_, ok = idemgrpc.Map(&idem.ReplayedError{Name: "ErrCardDeclined", Msg: "card declined"})
	assert.False(t, ok, "and so are their replays")
	own := status.Error(codes.NotFound, "no such payment")
	assert.Equal(t, own, idemgrpc.Error(own))
}

// TestRPCCodesAreGRPCs: runtime/idemrpc's codes, which do not import
// grpc-go, are grpc-go's numbers.
func TestRPCCodesAreGRPCs(t *testing.T) {
	for rpc, grpc := range map[idemrpc.Code]codes.Code{
		idemrpc.InvalidArgument: codes.InvalidArgument, idemrpc.PermissionDenied: codes.PermissionDenied,
		idemrpc.FailedPrecondition: codes.FailedPrecondition, idemrpc.Aborted: codes.Aborted,
		idemrpc.Internal: codes.Internal, idemrpc.Unavailable: codes.Unavailable,
	} {
		assert.Equal(t, grpc, codes.Code(rpc), grpc.String())
	}
}
