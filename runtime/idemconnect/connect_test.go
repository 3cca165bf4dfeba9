package idemconnect_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemconnect"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// The tests serve three procedures on loopback, with well-known types as
// messages (the amount in, the payment id out): Charge is atomic, Payout
// external and blocks until released, Seat atomic and holds the seat's row
// until released, Get has no side effects.

var (
	chargeMethod = &idem.Method[int64]{Name: "Test.Charge"}
	payoutMethod = &idem.Method[int64]{Name: "Test.Payout", LockTimeout: 4 * time.Second}
	seatMethod   = &idem.Method[int64]{Name: "Test.Seat"}
)

type (
	in   = wrapperspb.Int64Value
	out  = wrapperspb.Int64Value
	byID = errdetails.RequestInfo // request_id, and the amount in serving_data
)

const uuid4 = "0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5c"

type svc struct {
	db       *idemtest.DB
	store    *idem.Store
	attempts atomic.Int64
	executed atomic.Int64
	started  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	keys     []string // the Idempotency-Key header of every attempt at Charge
	marked   []bool   // whether each attempt at Charge was marked a retry (idem.RetryFrom)
	fail     func(attempt int64) error
	sawKey   chan string
	url      string
	onSQL    bool // the store is on database/sql: Charge runs through idem.Atomic

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

func (s *svc) charge(ctx context.Context, req *connect.Request[in]) (*connect.Response[out], error) {
	n := s.attempts.Add(1)
	s.mu.Lock()
	s.keys = append(s.keys, req.Header().Get(idemconnect.HeaderKey))
	s.marked = append(s.marked, idem.RetryFrom(ctx))
	s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return nil, err
		}
	}
	amount := req.Msg.GetValue()
	id, err := s.chargeBody(ctx, amount)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(wrapperspb.Int64(id)), nil
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

// chargeByID is Charge for a request that carries its key in an AIP-155
// request_id field: google.rpc.RequestInfo, whose serving_data holds the
// amount in decimal.
func (s *svc) chargeByID(ctx context.Context, req *connect.Request[byID]) (*connect.Response[out], error) {
	s.attempts.Add(1)
	s.mu.Lock()
	s.keys = append(s.keys, req.Header().Get(idemconnect.HeaderKey))
	s.mu.Unlock()
	amount, err := strconv.ParseInt(req.Msg.GetServingData(), 10, 64)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	id, err := s.chargeBody(ctx, amount)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(wrapperspb.Int64(id)), nil
}

func (s *svc) payout(ctx context.Context, req *connect.Request[in]) (*connect.Response[out], error) {
	id, err := idem.External(ctx, s.store, payoutMethod, fingerprint(req.Msg.GetValue()), func(ctx context.Context) (int64, error) {
		s.executed.Add(1)
		s.started <- struct{}{}
		select {
		case <-s.release:
			return 99, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(wrapperspb.Int64(id)), nil
}

// seat takes the seat: it adds one to the seat's row and records a
// payment, through idem.Atomic on a pgx.Tx or, on database/sql, a *sql.Tx.
// The first body to update the row holds it until the test releases seatHold.
func (s *svc) seat(ctx context.Context, req *connect.Request[in]) (*connect.Response[out], error) {
	const take, insert = `UPDATE seats SET taken = taken + 1 WHERE id = 1`, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`
	amount := req.Msg.GetValue()
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
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(wrapperspb.Int64(id)), nil
}

func (s *svc) get(ctx context.Context, _ *connect.Request[in]) (*connect.Response[out], error) {
	key, _ := idem.KeyFrom(ctx)
	s.sawKey <- key
	return connect.NewResponse(wrapperspb.Int64(7)), nil
}

func bearerScope(_ context.Context, req connect.AnyRequest) (string, error) {
	acct, ok := strings.CutPrefix(req.Header().Get("Authorization"), "Bearer ")
	if !ok {
		return "", errors.New("no bearer token")
	}
	return acct, nil
}

func start(t testing.TB) *svc { return startOn(t, false) }

// startOn serves the procedures; onSQL builds the store on database/sql
// (idem.NewSQLStore over the database's *sql.DB) instead of the pgx pool.
func startOn(t testing.TB, onSQL bool) *svc {
	t.Helper()
	return serve(t, onSQL, idemconnect.HandlerConfig{Scope: bearerScope})
}

// serve is startOn with the handler interceptor's configuration.
func serve(t testing.TB, onSQL bool, cfg idemconnect.HandlerConfig) *svc {
	t.Helper()
	s := &svc{
		db: idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`,
			`CREATE TABLE seats (id int PRIMARY KEY, taken bigint NOT NULL)`, `INSERT INTO seats VALUES (1, 0)`)),
		started:  make(chan struct{}, 1),
		release:  make(chan struct{}),
		sawKey:   make(chan string, 16),
		onSQL:    onSQL,
		seatHold: idemtest.NewHold(),
	}
	s.store, s.seats = newStore(t, s.db, onSQL), newStore(t, s.db, onSQL, idem.WithClaimWait(300*time.Millisecond))
	ic := connect.WithInterceptors(idemconnect.NewHandlerInterceptor(cfg))
	mux := http.NewServeMux()
	mux.Handle("/test.Payments/Charge", connect.NewUnaryHandler("/test.Payments/Charge", s.charge, ic))
	mux.Handle("/test.Payments/ChargeByID", connect.NewUnaryHandler("/test.Payments/ChargeByID", s.chargeByID, ic))
	mux.Handle("/test.Payments/Payout", connect.NewUnaryHandler("/test.Payments/Payout", s.payout, ic))
	mux.Handle("/test.Payments/Seat", connect.NewUnaryHandler("/test.Payments/Seat", s.seat, ic))
	mux.Handle("/test.Payments/Get", connect.NewUnaryHandler("/test.Payments/Get", s.get, ic,
		connect.WithIdempotency(connect.IdempotencyNoSideEffects)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
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
func onBothStores(t *testing.T, test func(t *testing.T, s *svc)) {
	t.Run("pgx", func(t *testing.T) { test(t, startOn(t, false)) })
	t.Run("database_sql", func(t *testing.T) { test(t, startOn(t, true)) })
}

func (s *svc) client(procedure string, opts ...connect.ClientOption) *connect.Client[in, out] {
	return connect.NewClient[in, out](http.DefaultClient, s.url+"/test.Payments/"+procedure, opts...)
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

func send(ctx context.Context, c *connect.Client[in, out], account, key string, amount int64) (*connect.Response[out], error) {
	req := connect.NewRequest(wrapperspb.Int64(amount))
	if account != "" {
		req.Header().Set("Authorization", "Bearer "+account)
	}
	if key != "" {
		req.Header().Set(idemconnect.HeaderKey, key)
	}
	return c.CallUnary(ctx, req)
}

func TestReplayOverConnect(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc) {
		c := s.client("Charge")
		first, err := send(t.Context(), c, "acct_1", "ch-1", 500)
		require.NoError(t, err)
		assert.Empty(t, first.Header().Get(idemconnect.HeaderReplayed))
		assert.Equal(t, "86400", first.Header().Get(idemconnect.HeaderRetention))
		again, err := send(t.Context(), c, "acct_1", `"ch-1"`, 500) // the quoted form is the same key
		require.NoError(t, err)
		assert.Equal(t, "true", again.Header().Get(idemconnect.HeaderReplayed))
		assert.Equal(t, first.Msg.GetValue(), again.Msg.GetValue())
		assert.Equal(t, 1, s.count(t))
	})
}

func TestErrorsAsConnectCodes(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc) {
		c := s.client("Charge")
		_, err := send(t.Context(), c, "acct_1", "", 500)
		assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "missing key: %v", err)
		_, err = send(t.Context(), c, "acct_1", strings.Repeat("k", 256), 500)
		assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "malformed key: %v", err)
		_, err = send(t.Context(), c, "", "k1", 500)
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "no scope: %v", err)
		_, err = send(t.Context(), c, "acct_1", "k1", 500)
		require.NoError(t, err)
		_, err = send(t.Context(), c, "acct_1", "k1", 999)
		assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "mismatch: %v", err)
		assert.Equal(t, 1, s.count(t))
	})
}

func TestTwinGetsAbortedWithRetryInfo(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc) {
		c := s.client("Payout")
		done := make(chan error, 1)
		go func() {
			_, err := send(t.Context(), c, "acct_1", "po-1", 700)
			done <- err
		}()
		<-s.started
		_, err := send(t.Context(), c, "acct_1", "po-1", 700)
		assert.Equal(t, connect.CodeAborted, connect.CodeOf(err), "twin: %v", err)
		d, ok := idemconnect.RetryDelay(err)
		assert.True(t, ok, "RetryInfo")
		assert.GreaterOrEqual(t, d, time.Second)
		close(s.release)
		require.NoError(t, <-done)
		resp, err := send(t.Context(), c, "acct_1", "po-1", 700)
		require.NoError(t, err)
		assert.Equal(t, "true", resp.Header().Get(idemconnect.HeaderReplayed))
		assert.Equal(t, int64(1), s.executed.Load())
	})
}

// TestTwinOfAHolderGetsAbortedWithRetryInfo: the first call's atomic body
// holds the seat's row (and the key) and does not end; its twin, whose
// body needs the same row, is answered CodeAborted with RetryInfo once
// Seat's claim wait (300 ms) ends, its body having taken no seat, and a
// retry after the first commits replays the first's answer. A twin whose
// body ran would wait on the seat's row, which the first releases only
// after the twin is answered: it would end at its own deadline instead.
func TestTwinOfAHolderGetsAbortedWithRetryInfo(t *testing.T) {
	onBothStores(t, func(t *testing.T, s *svc) {
		release := s.seatHold.Release
		t.Cleanup(release) // a failure does not leave the first call holding the row
		c := s.client("Seat")
		type result struct {
			resp *connect.Response[out]
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := send(t.Context(), c, "acct_1", "seat-1", 300)
			done <- result{resp, err}
		}()
		<-s.seatHold.Reached()

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, err := send(ctx, c, "acct_1", "seat-1", 300)
		require.NotEqual(t, connect.CodeDeadlineExceeded, connect.CodeOf(err), "the twin was not answered while the first call held the seat's row: %v", err)
		require.Equal(t, connect.CodeAborted, connect.CodeOf(err), "twin: %v", err)
		d, ok := idemconnect.RetryDelay(err)
		assert.True(t, ok, "the in-progress answer carries RetryInfo")
		assert.GreaterOrEqual(t, d, time.Second)
		assert.EqualValues(t, 1, s.seatHold.Passed(), "the twin's body took no seat")

		release()
		first := <-done
		require.NoError(t, first.err)
		retry := connect.NewRequest(wrapperspb.Int64(300))
		retry.Header().Set("Authorization", "Bearer acct_1")
		retry.Header().Set(idemconnect.HeaderKey, "seat-1")
		retry.Header().Set(idemconnect.HeaderPreviousAttempts, "1")
		again, err := c.CallUnary(t.Context(), retry)
		require.NoError(t, err)
		assert.Equal(t, "true", again.Header().Get(idemconnect.HeaderReplayed))
		assert.Equal(t, first.resp.Msg.GetValue(), again.Msg.GetValue())
		assert.EqualValues(t, 1, s.seatHold.Passed())
		assert.Equal(t, 1, s.count(t), "one payment")
		assert.Equal(t, 1, s.taken(t), "one seat taken")
	})
}

func TestNoSideEffectsSkipsTheLedger(t *testing.T) {
	s := start(t)
	c := s.client("Get", connect.WithIdempotency(connect.IdempotencyNoSideEffects),
		connect.WithInterceptors(idemconnect.NewClientInterceptor(idemconnect.ClientConfig{})))
	resp, err := send(t.Context(), c, "", "", 0)
	require.NoError(t, err, "no key and no scope needed")
	assert.Equal(t, int64(7), resp.Msg.GetValue())
	assert.Empty(t, resp.Header().Get(idemconnect.HeaderRetention))
	_, err = send(t.Context(), c, "acct_1", "k", 0)
	require.NoError(t, err)
	assert.Equal(t, "", <-s.sawKey, "the client interceptor adds no key to a read")
	assert.Equal(t, "", <-s.sawKey, "the handler interceptor does not put a key in the context")
}

func TestHandlerInterceptorRequiresAScope(t *testing.T) {
	assert.PanicsWithValue(t, idemconnect.ErrNoScope, func() { idemconnect.NewHandlerInterceptor(idemconnect.HandlerConfig{}) })
	assert.NotPanics(t, func() { idemconnect.NewHandlerInterceptor(idemconnect.HandlerConfig{SingleTenant: true}) })
}

func retrying(retries *atomic.Int64) connect.Option {
	return connect.WithInterceptors(idemconnect.NewClientInterceptor(idemconnect.ClientConfig{
		BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
		OnRetry: func(string, int, error) { retries.Add(1) },
	}))
}

func TestClientKeepsOneKeyAcrossItsRetries(t *testing.T) {
	s := start(t)
	var retries atomic.Int64
	c := s.client("Charge", retrying(&retries))
	s.fail = func(n int64) error {
		if n <= 2 {
			return connect.NewError(connect.CodeUnavailable, errors.New("try again"))
		}
		return nil
	}
	_, err := send(t.Context(), c, "acct_1", "", 500)
	require.NoError(t, err)
	_, err = send(t.Context(), c, "acct_1", "", 500)
	require.NoError(t, err)
	s.mu.Lock()
	keys := append([]string(nil), s.keys...)
	marked := append([]bool(nil), s.marked...)
	s.mu.Unlock()
	require.Len(t, keys, 4)
	assert.Equal(t, []bool{false, true, true, false}, marked, "the interceptor's retries are marked retries on the server")
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys[:3], "every attempt of a call carries its key")
	assert.NotEqual(t, keys[0], keys[3], "a new call is a new intention")
	assert.Equal(t, int64(2), retries.Load())
	assert.Equal(t, 2, s.count(t))
}

func TestClientRetriesOnlyWhatItShould(t *testing.T) {
	aborted := idemconnect.Error(&idem.InProgressError{})
	for _, tc := range []struct {
		name     string
		err      error
		attempts int64
	}{
		{"aborted with RetryInfo", aborted, 3},
		{"unavailable", connect.NewError(connect.CodeUnavailable, errors.New("down")), 3},
		{"aborted without RetryInfo", connect.NewError(connect.CodeAborted, errors.New("conflict")), 1},
		{"mismatch", idemconnect.Error(idem.ErrMismatch), 1},
		{"outcome unknown", idemconnect.Error(idem.ErrOutcomeNotRecorded), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t)
			c := s.client("Charge", connect.WithInterceptors(idemconnect.NewClientInterceptor(idemconnect.ClientConfig{
				MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
			})))
			s.fail = func(int64) error { return tc.err }
			_, err := send(t.Context(), c, "acct_1", "", 500)
			assert.Equal(t, connect.CodeOf(tc.err), connect.CodeOf(err))
			assert.Equal(t, tc.attempts, s.attempts.Load())
		})
	}
}

func TestClientNeverWaitsPastTheDeadline(t *testing.T) {
	s := start(t)
	var retries atomic.Int64
	c := s.client("Charge", retrying(&retries))
	s.fail = func(int64) error { return idemconnect.Error(&idem.InProgressError{RetryAfter: 20 * time.Second}) }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := send(ctx, c, "acct_1", "", 500)
	assert.Equal(t, connect.CodeAborted, connect.CodeOf(err))
	assert.Equal(t, int64(1), s.attempts.Load(), "a retry 20s away is past the 10s deadline: not made")
	assert.Zero(t, retries.Load())
}

func TestRequestIDFieldByName(t *testing.T) {
	assert.Empty(t, idemconnect.RequestIDOf(wrapperspb.Int64(5)), "a message without a request_id field has none")
	assert.Empty(t, idemconnect.RequestIDOf(wrapperspb.String(uuid4)), "a field of another name is not the request_id")
	assert.Equal(t, uuid4, idemconnect.RequestIDOf(&errdetails.RequestInfo{RequestId: uuid4}))
	assert.Empty(t, idemconnect.RequestIDOf(nil))
}
