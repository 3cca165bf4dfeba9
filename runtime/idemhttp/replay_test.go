package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// These tests run the middleware in front of real idempotent calls on a
// throwaway PostgreSQL: the replay header, and each error the calls return,
// as a client sees them over HTTP.

type chargeReq struct {
	Amount int64 `json:"amount"`
}

type receipt struct {
	PaymentID int64 `json:"payment_id"`
	Amount    int64 `json:"amount"`
}

var (
	chargeMethod = &idem.Method[receipt]{Name: "Test.Charge"}
	payoutMethod = &idem.Method[receipt]{Name: "Test.Payout", LockTimeout: 4 * time.Second}
	seatMethod   = &idem.Method[receipt]{Name: "Test.Seat"}
)

func fingerprint(method string, req chargeReq) []byte {
	f := idem.NewFingerprinter(method)
	f.Field("Amount")
	f.Int(req.Amount)
	return f.Sum()
}

// api is the service under test: POST /charges (atomic) and POST /payouts
// (external, blocks until release is closed), behind the middleware with the
// Authorization header as the scope.
type api struct {
	db       *idemtest.DB
	srv      *httptest.Server
	executed atomic.Int64
	started  chan struct{}
	release  chan struct{}
	// seatHold counts the seat bodies past their first statement (the
	// seat's row) and holds the first of them there.
	seatHold *idemtest.Hold
}

func newAPI(t testing.TB, store func(db *idemtest.DB) *idem.Store) *api {
	t.Helper()
	a := &api{
		db: idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`,
			`CREATE TABLE seats (id int PRIMARY KEY, taken bigint NOT NULL)`, `INSERT INTO seats VALUES (1, 0)`)),
		started:  make(chan struct{}, 1),
		release:  make(chan struct{}),
		seatHold: idemtest.NewHold(),
	}
	s := store(a.db)
	mw := idemhttp.New(idemhttp.Config{Scope: func(r *http.Request) (string, error) {
		if acct, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			return acct, nil
		}
		return "", fmt.Errorf("no bearer token")
	}})
	handle := func(call func(ctx context.Context, req chargeReq) (receipt, error)) http.Handler {
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req chargeReq
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, "bad body", http.StatusBadRequest)
				return
			}
			out, err := call(r.Context(), req)
			if idemhttp.WriteError(w, r, err) {
				return
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(out)
		}))
	}
	mux := http.NewServeMux()
	mux.Handle("POST /charges", handle(func(ctx context.Context, req chargeReq) (receipt, error) {
		return idem.Atomic(ctx, s, chargeMethod, fingerprint(chargeMethod.Name, req), func(ctx context.Context, tx pgx.Tx) (receipt, error) {
			a.executed.Add(1)
			out := receipt{Amount: req.Amount}
			err := tx.QueryRow(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, req.Amount).Scan(&out.PaymentID)
			return out, err
		})
	}))
	mux.Handle("POST /seats", handle(func(ctx context.Context, req chargeReq) (receipt, error) {
		return idem.Atomic(ctx, s, seatMethod, fingerprint(seatMethod.Name, req), func(ctx context.Context, tx pgx.Tx) (receipt, error) {
			if _, err := tx.Exec(ctx, `UPDATE seats SET taken = taken + 1 WHERE id = 1`); err != nil {
				return receipt{}, err
			}
			if err := a.seatHold.Pass(ctx); err != nil {
				return receipt{}, err
			}
			out := receipt{Amount: req.Amount}
			err := tx.QueryRow(ctx, `INSERT INTO payments (amount) VALUES ($1) RETURNING id`, req.Amount).Scan(&out.PaymentID)
			return out, err
		})
	}))
	mux.Handle("POST /payouts", handle(func(ctx context.Context, req chargeReq) (receipt, error) {
		return idem.External(ctx, s, payoutMethod, fingerprint(payoutMethod.Name, req), func(ctx context.Context) (receipt, error) {
			a.executed.Add(1)
			a.started <- struct{}{}
			select {
			case <-a.release:
				return receipt{PaymentID: 99, Amount: req.Amount}, nil
			case <-ctx.Done():
				return receipt{}, ctx.Err()
			}
		})
	}))
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func defaultStore(t *testing.T) func(db *idemtest.DB) *idem.Store {
	return func(db *idemtest.DB) *idem.Store {
		s, err := idem.NewStore(db.Pool)
		require.NoError(t, err)
		return s
	}
}

type reply struct {
	status    int
	replayed  []string
	retry     string
	retention string // Idempotency-Key-Retention
	ctype     string
	body      string
}

func (a *api) post(t *testing.T, path, account, key string, amount int64) reply {
	t.Helper()
	r, err := a.send(t.Context(), path, account, key, amount)
	require.NoError(t, err)
	return r
}

// retry is post as a client's retry: it says so (HeaderPreviousAttempts),
// so the server looks the key up before the handler's body runs.
func (a *api) retry(t *testing.T, path, account, key string, amount int64) reply {
	t.Helper()
	r, err := a.sendAttempt(t.Context(), path, account, key, amount, 1)
	require.NoError(t, err)
	return r
}

// send is post for goroutines other than the test's.
func (a *api) send(ctx context.Context, path, account, key string, amount int64) (reply, error) {
	return a.sendAttempt(ctx, path, account, key, amount, 0)
}

// sendAttempt is send after previous attempts of the request.
func (a *api) sendAttempt(ctx context.Context, path, account, key string, amount int64, previous int) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL+path, strings.NewReader(fmt.Sprintf(`{"amount":%d}`, amount)))
	if err != nil {
		return reply{}, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+account)
	req.Header.Set(idemhttp.HeaderKey, key)
	if previous > 0 {
		req.Header.Set(idemhttp.HeaderPreviousAttempts, strconv.Itoa(previous))
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("read body of POST %s: %w", path, err)
	}
	return reply{
		status:    resp.StatusCode,
		replayed:  resp.Header.Values(idemhttp.HeaderReplayed),
		retry:     resp.Header.Get("Retry-After"),
		retention: resp.Header.Get(idemhttp.HeaderRetention),
		ctype:     resp.Header.Get("Content-Type"),
		body:      string(body),
	}, nil
}

func (a *api) count(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, a.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

func problemOf(t *testing.T, r reply) idemhttp.Problem {
	t.Helper()
	require.Equal(t, idemhttp.ContentTypeProblem, r.ctype, r.body)
	var p idemhttp.Problem
	require.NoError(t, json.Unmarshal([]byte(r.body), &p))
	require.Equal(t, r.status, p.Status)
	return p
}

func TestReplayOverHTTP(t *testing.T) {
	a := newAPI(t, defaultStore(t))

	first := a.post(t, "/charges", "acct_1", `"ch-1"`, 500)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	assert.Empty(t, first.replayed, "the first response is not a replay")
	assert.Equal(t, "86400", first.retention, "the key is kept for the store's default retention, 24h")

	again := a.retry(t, "/charges", "acct_1", "ch-1", 500) // same key, bare form, said to be a retry
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.Equal(t, []string{"true"}, again.replayed)
	assert.Equal(t, first.body, again.body, "the replay is the stored response")
	assert.Equal(t, "86400", again.retention, "a replay advertises the same window")
	assert.Equal(t, int64(1), a.executed.Load())
	assert.Equal(t, 1, a.count(t))

	other := a.post(t, "/charges", "acct_2", "ch-1", 500) // same key, another tenant
	require.Equal(t, http.StatusCreated, other.status, other.body)
	assert.Empty(t, other.replayed, "a key never replays another scope's response")
	assert.NotEqual(t, first.body, other.body)
	assert.Equal(t, 2, a.count(t))

	mismatch := a.post(t, "/charges", "acct_1", "ch-1", 700)
	require.Equal(t, http.StatusUnprocessableEntity, mismatch.status)
	assert.Equal(t, idemhttp.TypeMismatch, problemOf(t, mismatch).Type)
	assert.Empty(t, mismatch.replayed)
	assert.Equal(t, "86400", mismatch.retention)
	assert.Equal(t, 2, a.count(t))
}

func TestTwinsOverHTTP(t *testing.T) {
	a := newAPI(t, defaultStore(t))
	type result struct {
		r   reply
		err error
	}
	both := idemtest.Twins(t, func(int) result {
		r, err := a.send(t.Context(), "/charges", "acct_1", "twin", 100)
		return result{r, err}
	})
	require.NoError(t, both[0].err)
	require.NoError(t, both[1].err)
	res := [2]reply{both[0].r, both[1].r}
	require.Equal(t, http.StatusCreated, res[0].status, res[0].body)
	require.Equal(t, http.StatusCreated, res[1].status, res[1].body)
	assert.Equal(t, res[0].body, res[1].body)
	assert.Equal(t, 1, len(res[0].replayed)+len(res[1].replayed), "exactly one twin carries Idempotent-Replayed")
	assert.Equal(t, 1, a.count(t))
}

func TestInProgressOverHTTP(t *testing.T) {
	a := newAPI(t, defaultStore(t))
	type result struct {
		r   reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.send(t.Context(), "/payouts", "acct_1", "po-1", 300)
		done <- result{r, err}
	}()
	select {
	case <-a.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the payout body did not start")
	}

	twin := a.post(t, "/payouts", "acct_1", "po-1", 300)
	require.Equal(t, http.StatusConflict, twin.status, twin.body)
	assert.Equal(t, idemhttp.TypeInProgress, problemOf(t, twin).Type)
	secs, err := strconv.Atoi(twin.retry)
	require.NoError(t, err, "Retry-After is whole seconds")
	assert.True(t, secs >= 1 && secs <= 4, "Retry-After %d is within the 4s lock", secs)

	close(a.release)
	res := <-done
	require.NoError(t, res.err)
	first := res.r
	require.Equal(t, http.StatusCreated, first.status, first.body)
	assert.Empty(t, first.replayed)

	again := a.post(t, "/payouts", "acct_1", "po-1", 300)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.Equal(t, []string{"true"}, again.replayed)
	assert.Equal(t, first.body, again.body)
	assert.Equal(t, int64(1), a.executed.Load())
}

// TestTwinOfAHolderOverHTTP: the first request's body holds the seat's
// row (and the key) and does not end; its twin is answered 409 with
// Retry-After once the store's claim wait ends, its body having taken no
// seat, and its retry after the first commits replays the first's answer.
func TestTwinOfAHolderOverHTTP(t *testing.T) {
	a := newAPI(t, func(db *idemtest.DB) *idem.Store {
		s, err := idem.NewStore(db.Pool, idem.WithClaimWait(300*time.Millisecond))
		require.NoError(t, err)
		return s
	})
	type result struct {
		r   reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.send(t.Context(), "/seats", "acct_1", "seat-1", 300)
		done <- result{r, err}
	}()
	<-a.seatHold.Reached()

	twin := a.post(t, "/seats", "acct_1", "seat-1", 300)
	require.Equal(t, http.StatusConflict, twin.status, twin.body)
	assert.Equal(t, idemhttp.TypeInProgress, problemOf(t, twin).Type)
	secs, err := strconv.Atoi(twin.retry)
	require.NoError(t, err, "Retry-After is whole seconds")
	assert.GreaterOrEqual(t, secs, 1)
	assert.EqualValues(t, 1, a.seatHold.Passed(), "the twin's body took no seat")

	a.seatHold.Release()
	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, http.StatusCreated, res.r.status, res.r.body)
	again := a.retry(t, "/seats", "acct_1", "seat-1", 300)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.Equal(t, []string{"true"}, again.replayed)
	assert.Equal(t, res.r.body, again.body)
	assert.EqualValues(t, 1, a.seatHold.Passed())
}

func TestStoreDownOverHTTP(t *testing.T) {
	a := newAPI(t, func(db *idemtest.DB) *idem.Store {
		pool, err := pgxpool.New(t.Context(), db.URL)
		require.NoError(t, err)
		pool.Close() // every use of a closed pool fails
		s, err := idem.NewStore(pool)
		require.NoError(t, err)
		return s
	})
	r := a.post(t, "/charges", "acct_1", "down-1", 100)
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	assert.Equal(t, idemhttp.TypeStoreUnavailable, problemOf(t, r).Type)
	assert.NotContains(t, r.body, "closed", "the database error is not shown")
	assert.Zero(t, a.executed.Load(), "the store fails closed")
}
