package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// The runtime on a Citus cluster (a coordinator and two workers): the
// ledger distributed by scope, a tenant's payments and inline orders
// co-located with it.

// startCitus starts a cluster of its own for t. Recovery of two-phase
// commits is off, so pg_dist_transaction keeps a record of every
// transaction that committed on two nodes: the count of such commits.
func startCitus(t *testing.T) *idemtest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := idemtest.StartCitus(ctx, pgserver.CitusConfig{Config: pgserver.Config{Settings: []string{"citus.recover_2pc_interval=-1"}}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Stop()) })
	return srv
}

// citusSetup makes payments (by tenant) and orders (by idempotency_scope,
// with inline mode's columns and index) distributed and co-located with
// the ledger, which idemtest distributes by scope.
func citusSetup(t testing.TB) []string {
	t.Helper()
	s, err := ledger.NewInline("orders")
	require.NoError(t, err)
	return append([]string{
		`CREATE TABLE payments (tenant text NOT NULL, id bigserial, amount bigint NOT NULL, PRIMARY KEY (tenant, id))`,
		`SELECT create_distributed_table('payments', 'tenant', colocate_with => 'idempotency_keys')`,
		`CREATE TABLE orders (id bigserial, item text NOT NULL, qty bigint NOT NULL, idempotency_scope text NOT NULL, PRIMARY KEY (idempotency_scope, id))`,
		`SELECT create_distributed_table('orders', 'idempotency_scope', colocate_with => 'idempotency_keys')`,
	}, s.DDL()...)
}

// tenantCharge is a body that writes a payment of tenant, the scope's
// own (one node) or another's (two).
func tenantCharge(tenant string, amount int64) func(context.Context, pgx.Tx) (Receipt, error) {
	return func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO payments (tenant, amount) VALUES ($1, $2) RETURNING id`, tenant, amount).Scan(&id); err != nil {
			return Receipt{}, err
		}
		return Receipt{PaymentID: id, Amount: amount, Note: tenant}, nil
	}
}

// sentWithArgs records every statement a pool sends, alone or in a
// batch, with the arguments it was first sent with.
type sentWithArgs struct {
	mu   sync.Mutex
	args map[string][]any
	all  []string // in order, repeats included
}

func (s *sentWithArgs) add(sql string, args []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.args[sql]; !ok {
		s.args[sql] = slices.Clone(args)
	}
	s.all = append(s.all, sql)
}

func (s *sentWithArgs) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL, d.Args)
	return ctx
}

func (s *sentWithArgs) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentWithArgs) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *sentWithArgs) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL, d.Args)
}

func (s *sentWithArgs) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// waitFor waits until a statement containing part has been sent.
func (s *sentWithArgs) waitFor(t *testing.T, part string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for sql := range s.args {
			if strings.Contains(sql, part) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no statement containing %q was sent", part)
}

// routing is what EXPLAIN says of one statement on the coordinator: the
// task count of each distributed scan in it and how many subplans (parts
// Citus runs first, on their own, because they did not route with the
// rest).
type routing struct {
	tasks    []int
	subplans int
	nodes    []string
}

// explainRouting explains sql with args on conn (without running it) and
// walks the plan for Citus's distributed scans.
func explainRouting(ctx context.Context, conn *pgx.Conn, sql string, args []any) (routing, error) {
	var plan string
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return routing{}, err
	}
	var tree any
	if err := json.Unmarshal([]byte(plan), &tree); err != nil {
		return routing{}, err
	}
	var r routing
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if dq, ok := v["Distributed Query"].(map[string]any); ok {
				if subs, ok := dq["Subplans"].([]any); ok {
					r.subplans += len(subs)
				}
				if job, ok := dq["Job"].(map[string]any); ok {
					n, _ := job["Task Count"].(float64)
					r.tasks = append(r.tasks, int(n))
					if tasks, ok := job["Tasks"].([]any); ok {
						for _, task := range tasks {
							if m, ok := task.(map[string]any); ok {
								node, _ := m["Node"].(string)
								r.nodes = append(r.nodes, node)
							}
						}
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(tree)
	return r, nil
}

// distributedTable matches a statement on one of the test's distributed
// tables.
var distributedTable = regexp.MustCompile(`\b(?:idempotency_keys|orders|payments)\b`)

// shardCommand matches the per-shard sweep's call through the coordinator.
var shardCommand = regexp.MustCompile(`master_run_on_worker\(`)

// TestCitus runs the runtime on a Citus cluster.
func TestCitus(t *testing.T) {
	srv := startCitus(t)
	t.Run("InlineStatementsRouteToOneShard", func(t *testing.T) { citusInlineRouting(t, srv) })
	t.Run("InlineOneTenantCommitsOnOneNode", func(t *testing.T) { citusTwoPhase(t, srv) })
	t.Run("SweepPerShard", func(t *testing.T) { citusSweep(t, srv) })
	for _, p := range paths {
		t.Run("LedgerStatementsRouteToOneShard/"+p.name, func(t *testing.T) { citusLedgerRouting(t, srv, p) })
		t.Run("AtomicOneTenantCommitsOnOneNode/"+p.name, func(t *testing.T) { citusAtomicTwoPhase(t, srv, p) })
	}
}

// citusRoutes explains, on the coordinator, every statement sent records
// that touches a distributed table (the ledger, orders, payments: the
// runtime's statements and the bodies' and lookups' own): each must be one
// task on one shard, with no subplan. The per-shard sweeps' calls must each name
// one shard and go to the node holding it. It checks what the tracer
// recorded, not a list, so a statement the runtime adds is checked too. It
// returns how many statements it explained and how many per-shard calls it
// checked.
func citusRoutes(t *testing.T, conn *pgx.Conn, sent *sentWithArgs) (explained, onShards int) {
	t.Helper()
	ctx := context.Background()
	placements := shardPlacements(t, conn)
	sent.mu.Lock()
	defer sent.mu.Unlock()
	for sql, args := range sent.args {
		if shardCommand.MatchString(sql) {
			onShards++
			checkShardCommand(t, placements, args)
			continue
		}
		if !distributedTable.MatchString(sql) {
			continue // BEGIN, COMMIT, SAVEPOINT, the catalog's
		}
		explained++
		r, err := explainRouting(ctx, conn, sql, args)
		if !assert.NoError(t, err, "EXPLAIN %s", sql) {
			continue
		}
		assert.Equal(t, []int{1}, r.tasks, "one distributed scan of one task: %s", sql)
		assert.Zero(t, r.subplans, "no subplan: %s", sql)
		t.Logf("one shard (%s): %s", strings.Join(r.nodes, ", "), firstLine(sql))
	}
	return explained, onShards
}

// citusInlineRouting runs every path of inline mode (claim, replay, the
// caller's transaction, a twin refused by the index, an expired key taken
// off its old row) and its sweep, and checks that every statement routes
// to one shard (citusRoutes).
func citusInlineRouting(t *testing.T, srv *idemtest.Server) {
	sent := &sentWithArgs{args: map[string][]any{}}
	db := srv.New(t, idemtest.WithSetup(citusSetup(t)...),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sent }))
	s, err := idem.NewStore(db.Pool) // the database's clock, which stamps inline keys
	require.NoError(t, err)
	ctx := idem.ContextWithScope(context.Background(), "tenant")
	k := func(key string) context.Context { return idem.ContextWithKey(ctx, key) }
	// The test's own statements (aging rows, EXPLAIN) go on a connection
	// the tracer does not see.
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer func() { assert.NoError(t, conn.Close(context.Background())) }()

	om := ordersMethod()
	first, err := idem.Inline(k("i"), s, om, fp("book"), orderByKey, createOrder("book", 1))
	require.NoError(t, err)
	replayCtx, outcome := idem.ContextWithOutcome(k("i"))
	again, err := idem.Inline(replayCtx, s, om, fp("book"), orderByKey, createOrder("book", 1))
	require.NoError(t, err)
	assert.True(t, outcome.Replayed())
	assert.Equal(t, first, again)
	_, err = idem.Inline(k("i"), s, om, fp("lamp"), orderByKey, createOrder("lamp", 1))
	require.ErrorIs(t, err, idem.ErrMismatch)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	for range 2 {
		_, err = idem.InlineInTx(k("i-tx"), s, tx, om, fp("book"), orderByKey, createOrder("book", 1))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))

	// The window ends: the key is taken off its old row and the request
	// runs as new; then the sweep clears the other expired keys.
	_, err = conn.Exec(ctx, `UPDATE orders SET idempotency_claimed_at = now() - interval '2 hours' WHERE idempotency_key IS NOT NULL`)
	require.NoError(t, err)
	reused, err := idem.Inline(k("i"), s, om, fp("lamp"), orderByKey, createOrder("lamp", 1))
	require.NoError(t, err)
	assert.NotEqual(t, first, reused)
	n, err := idem.SweepInline(ctx, s, om, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the expired key left (i-tx)")
	var keyed, rows int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(idempotency_key), count(*) FROM orders`).Scan(&keyed, &rows))
	assert.Equal(t, []int64{1, 3}, []int64{keyed, rows}, "the new order keeps its key; every row stays")

	explained, onShards := citusRoutes(t, conn, sent)
	assert.GreaterOrEqual(t, explained, 4, "statements explained: the body's INSERT, the check, the free, the lookup")
	assert.Equal(t, 1, onShards, "the sweep ran per shard")
}

func firstLine(sql string) string {
	line, _, _ := strings.Cut(sql, "\n")
	return line
}

// placement is the node holding one shard.
type placement struct {
	host string
	port int32
}

// shardPlacements reads where each shard of the test's tables is, by the
// shard's name.
func shardPlacements(t *testing.T, conn *pgx.Conn) map[string]placement {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT shard_name(s.logicalrelid, s.shardid), p.nodename, p.nodeport
FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)`)
	require.NoError(t, err)
	out := map[string]placement{}
	for rows.Next() {
		var name string
		var p placement
		require.NoError(t, rows.Scan(&name, &p.host, &p.port))
		out[name] = p
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out)
	return out
}

// shardName matches a shard's table in a command: the table's name and
// the shard's id.
var shardName = regexp.MustCompile(`\b(?:idempotency_keys|orders)_\d+\b`)

// checkShardCommand checks one per-shard sweep call: its command names one
// shard, every time, and goes to the node holding that shard.
func checkShardCommand(t *testing.T, placements map[string]placement, args []any) {
	t.Helper()
	require.Len(t, args, 3)
	host, _ := args[0].(string)
	port, _ := args[1].(int32)
	command, _ := args[2].(string)
	names := slices.Compact(slices.Sorted(slices.Values(shardName.FindAllString(command, -1))))
	require.Len(t, names, 1, "one shard: %s", command)
	p, ok := placements[names[0]]
	require.True(t, ok, "%s is a shard of the test's tables", names[0])
	assert.Equal(t, p, placement{host, port}, "%s goes to the node holding it", names[0])
	t.Logf("on %s:%d, one shard: %s", host, port, firstLine(command))
}

// twoPhaseCommits counts the transactions that committed on more than one
// node: each left a record per node it prepared on in pg_dist_transaction
// (gid citus_<group>_<pid>_<transaction>_<connection>), and recovery, which
// would delete the records, is off (startCitus).
func twoPhaseCommits(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(DISTINCT regexp_replace(gid, '_[0-9]+$', '')) FROM pg_dist_transaction`).Scan(&n))
	return n
}

// otherNodeTenant returns a tenant whose shard is on another node than
// tenant's.
func otherNodeTenant(t *testing.T, pool *pgxpool.Pool, tenant string) string {
	t.Helper()
	node := func(v string) string {
		var n string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT p.nodename || ':' || p.nodeport FROM pg_dist_shard_placement p
WHERE p.shardid = get_shard_id_for_distribution_column('idempotency_keys', $1::text)`, v).Scan(&n))
		return n
	}
	home := node(tenant)
	for i := range 100 {
		if other := fmt.Sprintf("other-%d", i); node(other) != home {
			return other
		}
	}
	t.Fatalf("no tenant on another node than %s's", tenant)
	return ""
}

// orderAndPayment is an inline body that writes its order (the claim)
// and a payment of tenant: the scope's own (one node) or another's (two).
func orderAndPayment(tenant string) func(context.Context, pgx.Tx) (Order, error) {
	return func(ctx context.Context, tx pgx.Tx) (Order, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		o, err := insertOrder(ctx, tx, k, "book", 1)
		if err != nil {
			return Order{}, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO payments (tenant, amount) VALUES ($1, 1)`, tenant); err != nil {
			return Order{}, fmt.Errorf("insert payment: %w", err)
		}
		return o, nil
	}
}

// citusTwoPhase checks, in inline mode, that a call whose body writes its
// own tenant's rows commits on one node (no two-phase commit), that a body
// writing another tenant's rows commits on both by two-phase commit, and
// that both keep the promise: a retry replays, the payment exists once.
func citusTwoPhase(t *testing.T, srv *idemtest.Server) {
	db := srv.New(t, idemtest.WithSetup(citusSetup(t)...))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	ctx := idem.ContextWithScope(context.Background(), "acme")
	other := otherNodeTenant(t, db.Pool, "acme")
	om := ordersMethod()
	const calls = 5
	run := func(name, tenant string) {
		for i := range calls {
			key := idem.ContextWithKey(ctx, fmt.Sprintf("%s-%d", name, i))
			first, err := idem.Inline(key, s, om, fp("book"), orderByKey, orderAndPayment(tenant))
			require.NoError(t, err)
			replayed, outcome := idem.ContextWithOutcome(key)
			again, err := idem.Inline(replayed, s, om, fp("book"), orderByKey, orderAndPayment(tenant))
			require.NoError(t, err)
			assert.True(t, outcome.Replayed(), "the retry replays")
			assert.Equal(t, first, again)
		}
	}

	before := twoPhaseCommits(t, db.Pool)
	run("own", "acme")
	assert.Equal(t, before, twoPhaseCommits(t, db.Pool), "a body writing its own tenant's rows commits on one node")
	run("cross", other)
	assert.Equal(t, before+calls, twoPhaseCommits(t, db.Pool), "a body writing another tenant's rows commits by two-phase commit, once per call")

	var own, cross int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant = 'acme'), count(*) FILTER (WHERE tenant = $1) FROM payments`, other).Scan(&own, &cross))
	assert.Equal(t, []int64{calls, calls}, []int64{own, cross}, "each intention wrote its payment once")
}

// citusSweep checks the per-shard sweep: every expired ledger row and
// inline key of every shard goes, rows a live claim holds stay, and the
// ledger of a plain table is still swept as one.
func citusSweep(t *testing.T, srv *idemtest.Server) {
	sent := &sentWithArgs{args: map[string][]any{}}
	clock := idemtest.NewClock(time.Time{})
	db := srv.New(t, idemtest.WithSetup(citusSetup(t)...),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sent }))
	var batches int
	var mu sync.Mutex
	s, err := idem.NewStore(db.Pool, idem.WithClock(clock.Now), idem.WithSweepShare(1),
		idem.WithHooks(idem.Hooks{Swept: func(context.Context, idem.Event) { mu.Lock(); batches++; mu.Unlock() }}))
	require.NoError(t, err)
	m, om := chargeMethod(), ordersMethod()
	const tenants, keys = 40, 5
	for i := range tenants {
		ctx := idem.ContextWithScope(context.Background(), fmt.Sprintf("tenant-%d", i))
		for j := range keys {
			key := idem.ContextWithKey(ctx, fmt.Sprintf("k%d", j))
			_, err := idem.Atomic(key, s, m, fp("1"), tenantCharge(fmt.Sprintf("tenant-%d", i), 1))
			require.NoError(t, err)
			_, err = idem.Inline(key, s, om, fp("book"), orderByKey, createOrder("book", 1))
			require.NoError(t, err)
		}
	}
	var shards int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'idempotency_keys'::regclass`).Scan(&shards))
	clock.Advance(retention + time.Minute)
	// Inline keys are stamped by the database's clock: put them before
	// the store's, past their window.
	_, err = db.Pool.Exec(context.Background(), `UPDATE orders SET idempotency_claimed_at = $1::timestamptz - interval '1 day'`, clock.Now())
	require.NoError(t, err)

	// A live claim: its row is expired by the clock, but a transaction
	// holds it, so the sweep skips it.
	held, err := db.Pool.Begin(context.Background())
	require.NoError(t, err)
	defer func() { _ = held.Rollback(context.Background()) }()
	_, err = held.Exec(context.Background(), `SELECT 1 FROM idempotency_keys WHERE scope = 'tenant-0' AND key = 'k0' FOR UPDATE`)
	require.NoError(t, err)

	n, err := s.Sweep(context.Background(), 3)
	require.NoError(t, err)
	assert.Equal(t, int64(tenants*keys-1), n, "every expired row but the held one")
	var left int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&left))
	assert.Equal(t, int64(1), left, "the row a live claim holds stays")
	assert.GreaterOrEqual(t, batches, shards, "at least one batch per shard")
	require.NoError(t, held.Rollback(context.Background()))

	n, err = idem.SweepInline(context.Background(), s, om, 4)
	require.NoError(t, err)
	assert.Equal(t, int64(tenants*keys), n, "every expired inline key")
	var keyed, rows int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(idempotency_key), count(*) FROM orders`).Scan(&keyed, &rows))
	assert.Equal(t, []int64{0, tenants * keys}, []int64{keyed, rows}, "keys cleared, rows kept")

	sent.mu.Lock()
	defer sent.mu.Unlock()
	var perShard int
	for _, sql := range sent.all {
		if shardCommand.MatchString(sql) {
			perShard++
		}
		assert.NotContains(t, sql, "SKIP LOCKED", "no sweep statement goes through the coordinator's planner")
	}
	assert.GreaterOrEqual(t, perShard, 2*shards, "both sweeps visited every shard")
}

// tenantChargeOn is tenantCharge on either path: a payment of tenant.
func tenantChargeOn(tenant string, amount int64) work[Receipt] {
	return func(ctx context.Context, q stmts) (Receipt, error) {
		id, err := q.queryInt(ctx, `INSERT INTO payments (tenant, amount) VALUES ($1, $2) RETURNING id`, tenant, amount)
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{PaymentID: id, Amount: amount, Note: tenant}, nil
	}
}

// citusLedgerRouting runs every path of atomic mode (claimed, replay,
// mismatch and its record, an expired key taken over, a record lost to a
// twin that committed first, a twin waiting on an uncommitted record, in
// the caller's transaction) and of external mode (claim, step, finish,
// release, extend, replay, mismatch) on path p, with the database's clock
// and with a store's, and checks that every statement routes to one shard
// (citusRoutes).
func citusLedgerRouting(t *testing.T, srv *idemtest.Server, p path) {
	sent := &sentWithArgs{args: map[string][]any{}}
	db := srv.New(t, idemtest.WithSetup(citusSetup(t)...),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sent }))
	s, err := p.newStore(db, idem.WithClaimWait(200*time.Millisecond), idem.WithHeartbeat(10*time.Millisecond))
	require.NoError(t, err)
	// The store's clock reads the time of the database's: the key
	// expires by either.
	clock := idemtest.NewClock(time.Now())
	clocked, err := p.newStore(db, idem.WithClock(clock.Now))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(idem.ContextWithScope(context.Background(), "acme"), time.Minute)
	defer cancel()
	k := func(key string) context.Context { return idem.ContextWithKey(ctx, key) }
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer func() { assert.NoError(t, conn.Close(context.Background())) }()
	m := chargeMethod()
	payments := func(tenant string) int64 {
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM payments WHERE tenant = $1`, tenant).Scan(&n))
		return n
	}

	// Atomic: claimed, replay, mismatch (recorded), with both clocks.
	for _, st := range []*idem.Store{s, clocked} {
		first, err := p.atomic(k("a"), st, m, fp("1"), tenantChargeOn("acme", 1))
		require.NoError(t, err)
		replayCtx, outcome := idem.ContextWithOutcome(k("a"))
		again, err := p.atomic(replayCtx, st, m, fp("1"), tenantChargeOn("acme", 1))
		require.NoError(t, err)
		assert.True(t, outcome.Replayed())
		assert.Equal(t, first, again)
		_, err = p.atomic(k("a"), st, m, fp("2"), tenantChargeOn("acme", 1))
		require.ErrorIs(t, err, idem.ErrMismatch)
	}
	var mismatched int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE scope = 'acme' AND key = 'a' AND mismatch_fingerprint = $1`, fp("2")).Scan(&mismatched))
	assert.Equal(t, int64(1), mismatched, "the mismatch is recorded")
	assert.Equal(t, int64(1), payments("acme"), "one intention, one payment")

	// An expired key is taken over (the database's clock, then the
	// store's).
	_, err = conn.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 hour' WHERE scope = 'acme' AND key = 'a'`)
	require.NoError(t, err)
	_, err = p.atomic(k("a"), s, m, fp("2"), tenantChargeOn("acme", 1))
	require.NoError(t, err, "the expired key runs as new")
	clock.Advance(2 * retention)
	_, err = p.atomic(k("a"), clocked, m, fp("3"), tenantChargeOn("acme", 1))
	require.NoError(t, err, "the expired key runs as new by the store's clock")
	assert.Equal(t, int64(3), payments("acme"))

	// A record lost to a twin that committed first: the body runs the
	// twin to its end before its first statement (which the key's lock
	// travels with, on pgx), then the record conflicts, the work rolls
	// back, and the call replays the twin's answer. On database/sql the
	// body holds the key's lock: the twin is told the key is in progress.
	nested := false
	var twin Receipt
	var twinErr error
	lost, err := p.atomic(k("lost"), s, m, fp("1"), func(ctx context.Context, q stmts) (Receipt, error) {
		if !nested {
			nested = true
			twin, twinErr = p.atomic(ctx, s, m, fp("1"), tenantChargeOn("acme", 7))
		}
		return tenantChargeOn("acme", 7)(ctx, q)
	})
	require.NoError(t, err)
	if twinDuringBody(t, p, twinErr) {
		twin = lost // the call's own answer
	} else {
		require.NoError(t, twinErr)
	}
	assert.Equal(t, twin, lost, "the twin's answer")
	assert.Equal(t, int64(4), payments("acme"), "the lost attempt's payment rolled back")

	// In the caller's transaction: claimed and replayed; the caller's
	// lock_timeout is its own again after the record, on the coordinator
	// and on the key's worker, to which the claim wait went. The caller's
	// own SET LOCAL stays on the coordinator (Citus propagates none by
	// default): a statement routed to the key's shard reads the worker's.
	tx, err := p.begin(ctx, db)
	require.NoError(t, err)
	require.NoError(t, tx.exec(ctx, `SET LOCAL lock_timeout = '17s'`))
	const coordinatorMs = `SELECT (extract(epoch FROM current_setting('lock_timeout')::interval) * 1000)::bigint`
	const workerMs = coordinatorMs + ` FROM idempotency_keys WHERE scope = 'acme' AND method = $1 AND key = 'a'`
	ms, err := tx.queryInt(ctx, workerMs, m.Name)
	require.NoError(t, err)
	require.Equal(t, int64(0), ms, "the worker's lock_timeout before the call: the statement reads the worker's")
	inTx, err := p.atomicInTx(k("tx"), s, tx, m, fp("1"), tenantChargeOn("acme", 1))
	require.NoError(t, err)
	again, err := p.atomicInTx(k("tx"), s, tx, m, fp("1"), tenantChargeOn("acme", 1))
	require.NoError(t, err)
	assert.Equal(t, inTx, again)
	ms, err = tx.queryInt(ctx, coordinatorMs)
	require.NoError(t, err)
	assert.Equal(t, int64(17000), ms, "the caller's lock_timeout is put back")
	ms, err = tx.queryInt(ctx, workerMs, m.Name)
	require.NoError(t, err)
	assert.Equal(t, int64(17000), ms, "the caller's lock_timeout is put back on the worker, as the coordinator's")

	// A twin of the caller's uncommitted record waits at most the claim
	// wait on the worker, then is in progress. Were the wait not bounded
	// there, it would last until the caller's transaction ends, which is
	// after the twin's answer.
	_, err = p.atomic(k("tx"), s, m, fp("1"), tenantChargeOn("acme", 1))
	var inProgress *idem.InProgressError
	require.ErrorAs(t, err, &inProgress, "the twin waited out the claim wait")
	require.NoError(t, tx.commit(ctx))
	replayed, err := p.atomic(k("tx"), s, m, fp("1"), tenantChargeOn("acme", 1))
	require.NoError(t, err)
	assert.Equal(t, inTx, replayed, "the committed record replays")
	assert.Equal(t, int64(5), payments("acme"))

	// External: claim, step, finish, replay, mismatch; a non-final error
	// releases the key; a long body's heartbeat extends the lock.
	for _, st := range []*idem.Store{s, clocked} {
		key := fmt.Sprintf("x-%p", st)
		out, err := idem.External(k(key), st, m, fp("1"), func(ctx context.Context) (Receipt, error) {
			return idem.Step(ctx, "charge", func(context.Context) (Receipt, error) { return Receipt{Amount: 3}, nil })
		})
		require.NoError(t, err)
		again, err := idem.External(k(key), st, m, fp("1"), func(context.Context) (Receipt, error) { return Receipt{Amount: 4}, nil })
		require.NoError(t, err)
		assert.Equal(t, out, again, "the replay")
		_, err = idem.External(k(key), st, m, fp("2"), func(context.Context) (Receipt, error) { return Receipt{}, nil })
		require.ErrorIs(t, err, idem.ErrMismatch)
		boom := errors.New("try again")
		_, err = idem.External(k(key+"-r"), st, m, fp("1"), func(context.Context) (Receipt, error) { return Receipt{}, boom })
		require.ErrorIs(t, err, boom)
		retried, err := idem.External(k(key+"-r"), st, m, fp("1"), func(context.Context) (Receipt, error) { return Receipt{Amount: 5}, nil })
		require.NoError(t, err, "a released key runs again at once")
		assert.Equal(t, int64(5), retried.Amount)
	}
	_, err = idem.External(k("x-long"), s, m, fp("1"), func(context.Context) (Receipt, error) {
		sent.waitFor(t, "greatest(expires_at,")
		return Receipt{Amount: 6}, nil
	})
	require.NoError(t, err)

	explained, _ := citusRoutes(t, conn, sent)
	for _, part := range []string{"ON CONFLICT (scope, method, key) DO UPDATE\n    SET fingerprint", "'in_progress', ", "SET status = 'done'",
		"SET locked_until = ", "greatest(expires_at,", "jsonb_set(steps", "SET mismatch_at", "AS r WHERE r.scope = "} {
		found := false
		sent.mu.Lock()
		for sql := range sent.args {
			found = found || strings.Contains(sql, part)
		}
		sent.mu.Unlock()
		assert.True(t, found, "a statement containing %q was sent and explained", part)
	}
	t.Logf("%s: %d statements explained", p.name, explained)
}

// citusAtomicTwoPhase checks, in atomic mode on path p, that a call whose
// body writes its own tenant's rows commits on one node (no two-phase
// commit), that a body writing another tenant's rows commits on both by
// two-phase commit, and that both keep the promise: a retry replays, the
// payment exists once.
func citusAtomicTwoPhase(t *testing.T, srv *idemtest.Server, p path) {
	db := srv.New(t, idemtest.WithSetup(citusSetup(t)...))
	s, err := p.newStore(db)
	require.NoError(t, err)
	ctx := idem.ContextWithScope(context.Background(), "acme")
	other := otherNodeTenant(t, db.Pool, "acme")
	m := chargeMethod()
	const calls = 5
	run := func(name, tenant string) {
		for i := range calls {
			key := idem.ContextWithKey(ctx, fmt.Sprintf("%s-%d", name, i))
			first, err := p.atomic(key, s, m, fp("1"), tenantChargeOn(tenant, 1))
			require.NoError(t, err)
			replayed, outcome := idem.ContextWithOutcome(key)
			again, err := p.atomic(replayed, s, m, fp("1"), tenantChargeOn(tenant, 1))
			require.NoError(t, err)
			assert.True(t, outcome.Replayed(), "the retry replays")
			assert.Equal(t, first, again)
		}
	}
	before := twoPhaseCommits(t, db.Pool)
	run("own", "acme")
	assert.Equal(t, before, twoPhaseCommits(t, db.Pool), "a body writing its own tenant's rows commits on one node")
	run("cross", other)
	assert.Equal(t, before+calls, twoPhaseCommits(t, db.Pool), "a body writing another tenant's rows commits by two-phase commit, once per call")
	var own, cross int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant = 'acme'), count(*) FILTER (WHERE tenant = $1) FROM payments`, other).Scan(&own, &cross))
	assert.Equal(t, []int64{calls, calls}, []int64{own, cross}, "each intention wrote its payment once")
}
