package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// seatsDDL is a business table that twins' bodies share: one show's seat
// counter, the row a reservation locks.
const seatsDDL = `CREATE TABLE seats (id int PRIMARY KEY, taken bigint NOT NULL);
INSERT INTO seats VALUES (1, 0)`

// reserve is a body that locks the seat's row first (its first
// statement), then reports that it got past it (worked), and charges.
func reserve(worked func()) work[Receipt] {
	return func(ctx context.Context, q stmts) (Receipt, error) {
		if err := q.exec(ctx, `UPDATE seats SET taken = taken + 1 WHERE id = 1`); err != nil {
			return Receipt{}, fmt.Errorf("take the seat: %w", err)
		}
		worked()
		return chargeOn(100)(ctx, q)
	}
}

// TestPathsTwinOfABodyHoldingARow: the first call's body holds a business
// row its twin's body needs (the seat's), and stays open (held by the
// test, not by a sleep). The twin does not wait on that row for as long as
// its context allows: it waits on the key's lock for the claim wait, then
// gets an *InProgressError, its body having done nothing. Once the first
// commits, the twin's retry replays the first's answer.
func TestPathsTwinOfABodyHoldingARow(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithClaimWait(50*time.Millisecond))
			require.NoError(t, e.exec(seatsDDL))
			var worked atomic.Int64
			holding, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // a failed test lets the first call end
			done := make(chan result, 1)
			go func() {
				ctx, o := idem.ContextWithOutcome(keyed("seat"))
				r, err := p.atomic(ctx, e.store, e.m, fp("100"), reserve(func() {
					worked.Add(1)
					close(holding)
					<-release
				}))
				done <- result{r, err, o.Replayed()}
			}()
			<-holding

			// Only the claim wait can end the twin's wait while the first
			// holds the seat: its own deadline is a minute away. A twin
			// that waits on the seat's row instead fails the test at once.
			ctx, cancel := context.WithTimeout(keyed("seat"), time.Minute)
			defer cancel()
			twin := make(chan error, 1)
			go func() {
				_, err := p.atomic(ctx, e.store, e.m, fp("100"), reserve(func() { worked.Add(1) }))
				twin <- err
			}()
			err := e.awaitNotOnARow(t, twin, cancel)
			var ip *idem.InProgressError
			require.ErrorAs(t, err, &ip, "the twin of a call holding its row")
			assert.Equal(t, "seat", ip.Key)
			assert.GreaterOrEqual(t, ip.RetryAfter, time.Second)
			assert.EqualValues(t, 1, worked.Load(), "the twin's body took no seat")
			assert.EqualValues(t, 1, e.inProgress.Load(), "the InProgress hook saw the twin")

			free()
			first := <-done
			require.NoError(t, first.err)
			again := e.callOn(p, keyed("seat"), "100", 100)
			require.NoError(t, again.err)
			assert.True(t, again.replayed)
			assert.Equal(t, first.r, again.r)
			assert.EqualValues(t, 1, worked.Load(), "the retry replayed")
			assert.Equal(t, 1, e.count(t, "payments"))
			assert.EqualValues(t, 1, e.seatsTaken(t))
		})
	}
}

// TestPathsTwinAfterTheFirstRolledBack: a twin queued on the key's lock
// behind a first call whose body then fails runs its own body once the
// lock is free, and answers with it.
func TestPathsTwinAfterTheFirstRolledBack(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p)
			require.NoError(t, e.exec(seatsDDL))
			holding, release := make(chan struct{}), make(chan struct{})
			done := make(chan result, 1)
			errFailed := errors.New("the first failed")
			go func() {
				_, err := p.atomic(keyed("seat"), e.store, e.m, fp("100"), func(ctx context.Context, q stmts) (Receipt, error) {
					_, err := reserve(func() { close(holding); <-release })(ctx, q)
					if err == nil {
						err = errFailed
					}
					return Receipt{}, err
				})
				done <- result{err: err}
			}()
			<-holding
			twin := make(chan result, 1)
			go func() { twin <- e.callOn(p, keyed("seat"), "100", 100) }()
			// The twin is queued on the key's lock once the server shows
			// its wait; then the first fails.
			e.waitForAdvisoryWaiter(t)
			close(release)
			first := <-done
			got := <-twin
			if first.err != nil {
				// The first looks the key up after its rollback: a twin
				// that recorded the key by then answers it (a body error
				// is answered from the key's row), which of the two
				// comes first is the machine's.
				require.ErrorIs(t, first.err, errFailed)
			}
			require.NoError(t, got.err)
			assert.False(t, got.replayed, "the twin ran its own body")
			assert.Equal(t, 1, e.count(t, "payments"))
		})
	}
}

// TestPathsTwinStormOneBodyAtATime: 256 twins of one key, whose bodies
// share the seat's row: at most one body runs at a time (counted between
// each body's first statement and its return), no call meets a deadlock
// (each would surface: one attempt only) and the server counts none, and
// every answer is the first's, or in progress.
func TestPathsTwinStormOneBodyAtATime(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e := newEnvOn(t, p, idem.WithMaxAttempts(1))
			require.NoError(t, e.exec(seatsDDL))
			before := e.deadlocks(t)
			var running, most atomic.Int64
			body := func(ctx context.Context, q stmts) (Receipt, error) {
				// A first statement that locks nothing, so that without the
				// key's lock bodies would overlap here.
				if _, err := q.queryInt(ctx, `SELECT taken FROM seats WHERE id = 1`); err != nil {
					return Receipt{}, err
				}
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if err := q.exec(ctx, `UPDATE seats SET taken = taken + 1 WHERE id = 1`); err != nil {
					return Receipt{}, err
				}
				return chargeOn(100)(ctx, q)
			}
			const n = 256
			res := make([]result, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					ctx, o := idem.ContextWithOutcome(keyed("storm"))
					r, err := p.atomic(ctx, e.store, e.m, fp("100"), body)
					res[i] = result{r, err, o.Replayed()}
				})
			}
			wg.Wait()
			var firsts, replays, inProgress int
			var answer Receipt
			for _, r := range res {
				var ip *idem.InProgressError
				var pgErr *pgconn.PgError
				switch {
				case errors.As(r.err, &ip):
					inProgress++
				case errors.As(r.err, &pgErr):
					t.Fatalf("a twin failed with %s: %v", pgErr.Code, r.err)
				case r.err != nil:
					t.Fatalf("a twin failed: %v", r.err)
				case r.replayed:
					replays++
				default:
					firsts++
					answer = r.r
				}
			}
			require.Equal(t, 1, firsts, "one call ran and answered on its own")
			for _, r := range res {
				if r.err == nil {
					assert.Equal(t, answer, r.r)
				}
			}
			assert.EqualValues(t, 1, most.Load(), "bodies running at once")
			assert.Equal(t, 1, e.count(t, "payments"))
			assert.EqualValues(t, 1, e.seatsTaken(t))
			assert.Equal(t, before, e.deadlocks(t), "pg_stat_database.deadlocks")
			t.Logf("%d twins: 1 first, %d replays, %d in progress", n, replays, inProgress)
		})
	}
}

// exec runs one statement (or a string of them) on the env's database.
func (e *env) exec(sql string) error {
	_, err := e.db.Pool.Exec(context.Background(), sql)
	return err
}

// seatsTaken is the seat's counter.
func (e *env) seatsTaken(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT taken FROM seats WHERE id = 1`).Scan(&n))
	return n
}

// waitForAdvisoryWaiter returns once a session waits for an advisory lock
// on the env's database.
func (e *env) waitForAdvisoryWaiter(t *testing.T) {
	t.Helper()
	for {
		var n int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitNotOnARow returns the error from call, unless the server shows a
// session waiting on a row (a row's lock, or the transaction that holds
// it) first: then it cancels the call and fails the test.
func (e *env) awaitNotOnARow(t *testing.T, call <-chan error, cancel func()) error {
	t.Helper()
	for {
		select {
		case err := <-call:
			return err
		default:
		}
		var n int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
WHERE locktype IN ('transactionid', 'tuple') AND NOT granted`).Scan(&n))
		if n > 0 {
			cancel()
			t.Fatalf("the twin waits on the row the first call holds")
		}
		time.Sleep(time.Millisecond)
	}
}

// deadlocks is pg_stat_database.deadlocks for the env's database, read
// once every other session's statistics are in: the pool's connections
// are closed (a backend flushes its statistics before it leaves
// pg_stat_activity), and a fresh pool opened.
func (e *env) deadlocks(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	cfg := e.db.Pool.Config()
	e.db.Pool.Reset()
	conn, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close()
	for {
		var others int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&others))
		if others == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var n int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
	return n
}
