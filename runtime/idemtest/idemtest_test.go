package idemtest_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// primaryKey returns the columns of table's primary key, in order.
func primaryKey(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT a.attname
		FROM pg_index i
		JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1::regclass AND i.indisprimary
		ORDER BY k.ord`, table)
	require.NoError(t, err)
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return cols
}

func TestNewGivesWorkingPoolWithLedger(t *testing.T) {
	db := idemtest.New(t)
	require.NotNil(t, db.Pool)
	assert.NotEmpty(t, db.URL)
	assert.Regexp(t, `^idemtest_[a-z0-9_]+_[0-9a-f]{12}$`, db.Name)

	var current string
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&current))
	assert.Equal(t, db.Name, current)

	ledger, err := idem.LedgerSchema(idem.DefaultTable)
	require.NoError(t, err)
	assert.Equal(t, ledger.Key, primaryKey(t, db.Pool, idem.DefaultTable))

	// The URL reaches the same database, for tools that take a URL.
	conn, err := pgx.Connect(t.Context(), db.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&current))
	assert.Equal(t, db.Name, current)
}

func TestPoolAllowsSeventyConnections(t *testing.T) {
	db := idemtest.New(t)
	assert.EqualValues(t, idemtest.PoolMaxConns, db.Pool.Config().MaxConns)
	conns := make([]*pgxpool.Conn, 0, 70)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range 70 {
		c, err := db.Pool.Acquire(t.Context())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	var n int
	require.NoError(t, conns[69].QueryRow(t.Context(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()").Scan(&n))
	assert.GreaterOrEqual(t, n, 70)
}

func TestDatabasesAreIsolated(t *testing.T) {
	a := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup("CREATE TABLE only_in_a (id int)"))
	b := idemtest.New(t, idemtest.WithoutLedger())
	assert.NotEqual(t, a.Name, b.Name)

	var reg *string
	require.NoError(t, a.Pool.QueryRow(t.Context(), "SELECT to_regclass('only_in_a')::text").Scan(&reg))
	require.NotNil(t, reg)
	require.NoError(t, b.Pool.QueryRow(t.Context(), "SELECT to_regclass('only_in_a')::text").Scan(&reg))
	assert.Nil(t, reg, "a table created in one test database is visible in another")
}

func TestWithoutLedger(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace").Scan(&n))
	assert.Zero(t, n)
}

func TestDatabaseIsDroppedAtCleanup(t *testing.T) {
	observer := idemtest.New(t, idemtest.WithoutLedger())
	var name string
	var pool *pgxpool.Pool
	t.Run("inner", func(t *testing.T) {
		db := idemtest.New(t)
		name, pool = db.Name, db.Pool
		// A connection left idle in a transaction must not stop the drop.
		conn, err := pgx.Connect(t.Context(), db.URL)
		require.NoError(t, err)
		_, err = conn.Exec(t.Context(), "BEGIN")
		require.NoError(t, err)
		var exists bool
		require.NoError(t, observer.Pool.QueryRow(t.Context(),
			"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists))
		require.True(t, exists)
	})
	var exists bool
	require.NoError(t, observer.Pool.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	assert.False(t, exists, "database %s survived its test", name)
	assert.Error(t, pool.Ping(t.Context()), "the pool is closed after the test")
}

func TestWithTableSchemaQualified(t *testing.T) {
	db := idemtest.New(t, idemtest.WithTable("billing.idem_ledger"))
	ledger, err := idem.LedgerSchema("billing.idem_ledger")
	require.NoError(t, err)
	assert.Equal(t, ledger.Key, primaryKey(t, db.Pool, "billing.idem_ledger"))

	var reg *string
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT to_regclass($1)::text", idem.DefaultTable).Scan(&reg))
	assert.Nil(t, reg, "the default ledger is not created when another table is named")
}

func TestWithTableRejectsUnsafeName(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		idemtest.New(ft, idemtest.WithTable(`x"; DROP DATABASE postgres; --`))
	}()
	<-ran
	assert.True(t, ft.fatal.Load())
	assert.Contains(t, ft.msg, "not a safe SQL identifier")
}

func TestWithSetup(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(
		"CREATE TABLE balances (account text PRIMARY KEY, cents bigint NOT NULL)",
		"INSERT INTO balances VALUES ('a', 100); INSERT INTO balances VALUES ('b', 5)",
	))
	var total int64
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT sum(cents) FROM balances").Scan(&total))
	assert.EqualValues(t, 105, total)
}

func TestWithSetupRunsConcurrentIndexOnItsOwn(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(
		"CREATE TABLE orders (id bigint PRIMARY KEY, ref text NOT NULL)",
		"CREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref)",
	))
	_, err := db.Pool.Exec(t.Context(), "INSERT INTO orders VALUES (1, 'r'), (2, 'r')")
	require.Error(t, err, "the unique index exists")
}

// countingTracer counts the queries a pool sends.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestWithPoolConfigTracerSeesOnlyTheTestsQueries(t *testing.T) {
	tracer := &countingTracer{}
	db := idemtest.New(t,
		idemtest.WithSetup("CREATE TABLE t (id int)", "INSERT INTO t VALUES (1)"),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = tracer }))
	assert.Zero(t, tracer.n.Load(), "set-up queries went through the test's pool")
	var n int
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n))
	assert.Equal(t, 1, n)
	assert.EqualValues(t, 1, tracer.n.Load())
}

func TestNewInParallelTests(t *testing.T) {
	names := make(chan string, 8)
	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				opts := []idemtest.Option{}
				if i%2 == 1 {
					opts = append(opts, idemtest.WithTable(fmt.Sprintf("s%d.ledger", i)))
				}
				db := idemtest.New(t, opts...)
				_, err := db.Pool.Exec(t.Context(), "SELECT 1")
				require.NoError(t, err)
				names <- db.Name
			})
		}
	})
	close(names)
	seen := map[string]bool{}
	for n := range names {
		assert.False(t, seen[n], "database name %s given twice", n)
		seen[n] = true
	}
	assert.Len(t, seen, 8)
}

func TestWithSetupErrorNamesStatement(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		idemtest.New(ft, idemtest.WithSetup("CREATE TABLE broken (id int"))
	}()
	<-ran
	assert.True(t, ft.fatal.Load())
	assert.Contains(t, ft.msg, "CREATE TABLE broken (id int")
	assert.Contains(t, ft.msg, "syntax error")
}

func TestWithPoolConfig(t *testing.T) {
	var called bool
	db := idemtest.New(t, idemtest.WithPoolConfig(func(c *pgxpool.Config) {
		called = true
		c.MaxConns = 3
	}))
	assert.True(t, called)
	assert.EqualValues(t, 3, db.Pool.Config().MaxConns)
}

func TestRunsAsRootByDroppingPrivileges(t *testing.T) {
	if os.Getenv(idemtest.EnvDatabaseURL) != "" {
		t.Log("server comes from " + idemtest.EnvDatabaseURL + "; checking it is reachable")
	}
	db := idemtest.New(t)
	var superuser string
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT current_setting('is_superuser')").Scan(&superuser))
	if os.Getenv(idemtest.EnvDatabaseURL) == "" {
		// The throwaway server runs as a non-root user even when the tests
		// run as root; its data directory is owned by that user.
		var dataDir string
		require.NoError(t, db.Pool.QueryRow(t.Context(), "SHOW data_directory").Scan(&dataDir))
		fi, err := os.Stat(dataDir)
		require.NoError(t, err)
		assert.NotZero(t, fileUID(fi), "the data directory is owned by root")
		var maxConns int
		require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT current_setting('max_connections')::int").Scan(&maxConns))
		assert.GreaterOrEqual(t, maxConns, 300)
	}
}

func TestStormRunsAllGoroutinesConcurrently(t *testing.T) {
	const n = 64
	var inside sync.WaitGroup
	inside.Add(n)
	all := make(chan struct{})
	go func() { inside.Wait(); close(all) }()
	var maxSeen atomic.Int64
	var current atomic.Int64

	results := idemtest.Storm(t, n, func(i int) int {
		c := current.Add(1)
		for {
			m := maxSeen.Load()
			if c <= m || maxSeen.CompareAndSwap(m, c) {
				break
			}
		}
		inside.Done()
		// Every goroutine waits here until all n are inside fn at once. If
		// Storm ran them one after another, none could get past this point;
		// the timeout only turns that hang into a failure.
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			t.Errorf("goroutine %d: not all %d goroutines were inside fn at once", i, n)
		}
		current.Add(-1)
		return i * i
	})
	require.Len(t, results, n)
	for i, r := range results {
		assert.Equal(t, i*i, r, "results are in index order")
	}
	assert.EqualValues(t, n, maxSeen.Load())
}

func TestStormHoldsSixtyFourConnections(t *testing.T) {
	db := idemtest.New(t)
	const n = 64
	var inside sync.WaitGroup
	inside.Add(n)
	errs := idemtest.Storm(t, n, func(i int) error {
		tx, err := db.Pool.Begin(context.Background())
		if err != nil {
			inside.Done()
			return err
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		_, err = tx.Exec(context.Background(), "SELECT 1")
		inside.Done()
		inside.Wait() // all 64 hold a connection at the same time
		return err
	})
	for i, err := range errs {
		assert.NoError(t, err, "goroutine %d", i)
	}
}

func TestTwins(t *testing.T) {
	var both sync.WaitGroup
	both.Add(2)
	got := idemtest.Twins(t, func(i int) string {
		both.Done()
		both.Wait() // both are running at once
		return []string{"zero", "one"}[i]
	})
	assert.Equal(t, [2]string{"zero", "one"}, got)
}

func TestStormReportsPanic(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		idemtest.Storm(ft, 4, func(i int) int {
			if i == 2 {
				panic("boom")
			}
			return i
		})
	}()
	<-ran
	assert.True(t, ft.fatal.Load())
	assert.Contains(t, ft.msg, "goroutine 2 of 4: panic: boom")
}

func TestClock(t *testing.T) {
	c := idemtest.NewClock(time.Time{})
	start := c.Now()
	assert.Equal(t, 2026, start.Year())
	assert.Equal(t, time.UTC, start.Location())
	assert.Equal(t, start, start.Truncate(time.Microsecond))
	assert.Equal(t, start, idemtest.NewClock(time.Time{}).Now(), "deterministic")

	c.Advance(48*time.Hour + time.Nanosecond)
	assert.Equal(t, start.Add(48*time.Hour), c.Now(), "truncated to microseconds")

	given := time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC)
	assert.Equal(t, given.Truncate(time.Microsecond), idemtest.NewClock(given).Now())

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, start.Add(48*time.Hour+800*time.Second), c.Now())
}

// TestClockRoundTripsThroughPostgres checks the truncation claim: a time from
// the clock reads back from PostgreSQL unchanged.
func TestClockRoundTripsThroughPostgres(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	c := idemtest.NewClock(time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC))
	var back time.Time
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SELECT $1::timestamptz", c.Now()).Scan(&back))
	assert.True(t, c.Now().Equal(back), "%s != %s", c.Now(), back)
}

// fatalRecorder records Fatalf instead of failing the enclosing test, so a
// test can check what New or Storm reports. Fatalf ends the calling goroutine
// like the real one does.
type fatalRecorder struct {
	testing.TB
	mu    sync.Mutex
	msg   string
	fatal atomic.Bool
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	f.fatal.Store(true)
	runtime.Goexit()
}

// fileUID is the owner of a file.
func fileUID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// BenchmarkNew measures creating a test database with the ledger (the
// databases are dropped when the benchmark ends).
func BenchmarkNew(b *testing.B) {
	idemtest.New(b) // start the server and make the template outside the timing
	b.ResetTimer()
	for b.Loop() {
		if err := idemtest.New(b).Pool.Ping(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewWithoutLedger measures creating an empty test database.
func BenchmarkNewWithoutLedger(b *testing.B) {
	idemtest.New(b, idemtest.WithoutLedger())
	b.ResetTimer()
	for b.Loop() {
		if err := idemtest.New(b, idemtest.WithoutLedger()).Pool.Ping(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
