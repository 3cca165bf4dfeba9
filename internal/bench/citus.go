package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// The citus experiment runs on a Citus cluster of its own (a coordinator and
// -citus.workers workers, idemtest.StartCitus): the ledger distributed by
// scope, a tenant's payments and inline orders co-located with it. It
// measures each path against its floor on the same cluster, then loads
// -citus.keys expired keys over -citus.scopes scopes, reports how evenly
// the shards hold them, and sweeps them shard by shard while live claims
// run, their p99 against the p99 before the sweep.

// citusSetup is the cluster's business tables: payments by tenant, orders
// by idempotency_scope (inline mode), co-located with the ledger.
func citusSetup() ([]string, error) {
	s, err := ledger.NewInline("orders")
	if err != nil {
		return nil, err
	}
	return append([]string{
		`CREATE TABLE payments (tenant text NOT NULL, id bigserial, amount bigint NOT NULL, PRIMARY KEY (tenant, id))`,
		`SELECT create_distributed_table('payments', 'tenant', colocate_with => 'idempotency_keys')`,
		`CREATE TABLE orders (id bigserial, item text NOT NULL, qty bigint NOT NULL, idempotency_scope text NOT NULL, PRIMARY KEY (idempotency_scope, id))`,
		`SELECT create_distributed_table('orders', 'idempotency_scope', colocate_with => 'idempotency_keys')`,
	}, s.DDL()...), nil
}

// citusTenants is how many tenants the paths spread their calls over.
const citusTenants = 64

// citusTenant is the tenant of the i-th call.
func citusTenant(i int) string { return "tenant-" + strconv.Itoa(i%citusTenants) }

// citusPayment is the work: one payment of tenant.
func citusPayment(ctx context.Context, tx pgx.Tx, tenant string) (Receipt, error) {
	r := Receipt{Amount: 100}
	if err := tx.QueryRow(ctx, `INSERT INTO payments (tenant, amount) VALUES ($1, $2) RETURNING id`, tenant, r.Amount).Scan(&r.PaymentID); err != nil {
		return Receipt{}, fmt.Errorf("insert payment: %w", err)
	}
	return r, nil
}

// citusOrder is inline mode's work: one order carrying the key.
func citusOrder(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (int64, error) {
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO orders (item, qty, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ('book', 1, $1, $2, $3) RETURNING id`, k.Scope, k.Key, k.Fingerprint).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert order: %w", err)
	}
	return id, nil
}

// citusOrderByKey is inline mode's lookup.
func citusOrderByKey(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (int64, []byte, error) {
	var id int64
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id, idempotency_fingerprint FROM orders WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&id, &fp)
	return id, fp, err
}

// citusPaths are the paths of the experiment and their floors, on one
// database of the cluster: each path's op, and the op that claims what a
// replay path replays (nil for the others).
type citusPath struct {
	name, floor string
	prepare     op
	run         op
}

func citusPaths(db *idemtest.DB, s *idem.Store, other map[string]string) []citusPath {
	m := chargeMethod()
	im := &idem.InlineMethod[int64]{Name: "Payments.Order", Table: "orders", Retention: retention}
	fp := fingerprint()
	scoped := func(ctx context.Context, prefix string, i int) context.Context {
		return idem.ContextWithKey(idem.ContextWithScope(ctx, citusTenant(i)), prefix+strconv.Itoa(i))
	}
	atomicCall := func(prefix string) op {
		return func(ctx context.Context, i int) error {
			tenant := citusTenant(i)
			_, err := idem.Atomic(scoped(ctx, prefix, i), s, m, fp, func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
				return citusPayment(ctx, tx, tenant)
			})
			return err
		}
	}
	inlineCall := func(prefix string, cross bool) op {
		return func(ctx context.Context, i int) error {
			_, err := idem.Inline(scoped(ctx, prefix, i), s, im, fp, citusOrderByKey, func(ctx context.Context, tx pgx.Tx) (int64, error) {
				k, _ := idem.InlineKeyFrom(ctx)
				id, err := citusOrder(ctx, tx, k)
				if err == nil && cross {
					_, err = citusPayment(ctx, tx, other[k.Scope])
				}
				return id, err
			})
			return err
		}
	}
	work := func(prefix string, cross bool) op {
		return func(ctx context.Context, i int) error {
			return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				tenant := citusTenant(i)
				if _, err := citusOrder(ctx, tx, idem.InlineKey{Scope: tenant, Key: prefix + strconv.Itoa(i), Fingerprint: fp}); err != nil {
					return err
				}
				if !cross {
					return nil
				}
				_, err := citusPayment(ctx, tx, other[tenant])
				return err
			})
		}
	}
	lookup := func(ctx context.Context, i int) error {
		var n int
		return db.Pool.QueryRow(ctx, `SELECT 1 FROM idempotency_keys WHERE scope = $1 AND method = $2 AND key = $3`,
			citusTenant(i), m.Name, "r"+strconv.Itoa(i)).Scan(&n)
	}
	return []citusPath{
		{name: "floor", run: func(ctx context.Context, i int) error {
			return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				_, err := citusPayment(ctx, tx, citusTenant(i))
				return err
			})
		}},
		{name: "claimed", floor: "floor", run: atomicCall("c")},
		{name: "lookup", prepare: atomicCall("r"), run: lookup},
		{name: "replay", floor: "lookup", prepare: atomicCall("r"), run: atomicCall("r")},
		{name: "inline floor", run: work("w", false)},
		{name: "inline claimed", floor: "inline floor", run: inlineCall("i", false)},
		{name: "inline replay", floor: "lookup", prepare: inlineCall("ir", false), run: inlineCall("ir", false)},
		{name: "two-tenant floor", run: work("w2-", true)},
		{name: "inline, another tenant's row too", floor: "two-tenant floor", run: inlineCall("x", true)},
	}
}

// otherNodeTenants maps each tenant to one whose shard is on another node.
func otherNodeTenants(ctx context.Context, db *idemtest.DB) (map[string]string, error) {
	node := map[string]string{}
	for i := range citusTenants {
		var n string
		if err := db.Pool.QueryRow(ctx, `SELECT p.nodename || ':' || p.nodeport FROM pg_dist_shard_placement p
WHERE p.shardid = get_shard_id_for_distribution_column('idempotency_keys', $1::text)`, citusTenant(i)).Scan(&n); err != nil {
			return nil, fmt.Errorf("where is %s: %w", citusTenant(i), err)
		}
		node[citusTenant(i)] = n
	}
	out := map[string]string{}
	for t, n := range node {
		for u, m := range node {
			if m != n {
				out[t] = u
				break
			}
		}
		if out[t] == "" {
			return nil, errors.New("every tenant is on one node: the cluster needs two workers")
		}
	}
	return out, nil
}

func (b *bench) citus(ctx context.Context) (err error) {
	// Recovery of two-phase commits off: pg_dist_transaction keeps a
	// record of each, which the table counts.
	srv, err := idemtest.StartCitus(ctx, pgserver.CitusConfig{Workers: b.cfg.citusWorkers,
		Config: pgserver.Config{Settings: []string{"citus.recover_2pc_interval=-1", "citus.shard_count=" + strconv.Itoa(b.cfg.citusShards)}}})
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.Stop(); err == nil {
			err = serr
		}
	}()
	setup, err := citusSetup()
	if err != nil {
		return err
	}
	db, err := srv.NewDB(ctx, "bench_citus", idemtest.WithSetup(setup...))
	if err != nil {
		return err
	}
	s, err := idem.NewStore(db.Pool)
	if err != nil {
		return err
	}
	other, err := otherNodeTenants(ctx, db)
	if err != nil {
		return err
	}
	w := b.w
	fmt.Fprintf(w, "\n## Citus: each path against its floor (a coordinator and %d workers, %d shards, %d tenants, %d calls per path and concurrency)\n\n",
		b.cfg.citusWorkers, b.cfg.citusShards, citusTenants, b.cfg.citusOps)
	fmt.Fprintln(w, "| path | goroutines | p50 µs | p99 µs | calls/s | floor | p50 ÷ floor | calls/s ÷ floor | two-phase commits per call |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	paths := citusPaths(db, s, other)
	warm := min(b.cfg.citusOps, 200)
	for _, c := range b.cfg.citusConcurrency {
		got := map[string]result{}
		for _, p := range paths {
			// Every path's keys are new for it at each concurrency
			// (keys), except a replay path's, which replays the keys
			// its prepare claimed: the warm-up's and the measurement's.
			keys := &counter{}
			keys.n.Store(int64(1_000_000 * c))
			if p.prepare != nil {
				prep := &counter{}
				prep.n.Store(keys.n.Load())
				if _, err := measure(ctx, p.prepare, prep, c, load{ops: warm + b.cfg.citusOps}); err != nil {
					return fmt.Errorf("%s: prepare: %w", p.name, err)
				}
			}
			if _, err := measure(ctx, p.run, keys, c, load{ops: warm}); err != nil {
				return fmt.Errorf("%s: warm up: %w", p.name, err)
			}
			before, err := twoPhase(ctx, db)
			if err != nil {
				return err
			}
			r, err := measure(ctx, p.run, keys, c, load{ops: b.cfg.citusOps})
			if err != nil {
				return fmt.Errorf("%s at %d: %w", p.name, c, err)
			}
			after, err := twoPhase(ctx, db)
			if err != nil {
				return err
			}
			r.path = p.name
			got[p.name] = r
			p50, tput := "–", "–"
			if f, ok := got[p.floor]; ok {
				p50 = fmt.Sprintf("%.2f", float64(r.p50)/float64(f.p50))
				tput = fmt.Sprintf("%.2f", r.throughput()/f.throughput())
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %.0f | %s | %s | %s | %.2f |\n", p.name, c, micros(r.p50), micros(r.p99), r.throughput(),
				orDash(p.floor), p50, tput, float64(after-before)/float64(r.ops))
		}
	}
	if b.cfg.citusKeys > 0 {
		return b.citusScale(ctx, db, s)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// twoPhase counts the transactions that committed on two nodes or more
// and are still recorded (pg_dist_transaction keeps them until recovery).
func twoPhase(ctx context.Context, db *idemtest.DB) (int64, error) {
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT count(DISTINCT regexp_replace(gid, '_[0-9]+$', '')) FROM pg_dist_transaction`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count two-phase commits: %w", err)
	}
	return n, nil
}

// citusScale loads the expired keys, reports the shards' balance, and
// measures live claims before and during a sweep per shard.
func (b *bench) citusScale(ctx context.Context, db *idemtest.DB, s *idem.Store) error {
	w := b.w
	keys, scopes := b.cfg.citusKeys, b.cfg.citusScopes
	t0 := time.Now()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, created_at, expires_at)
SELECT 'scope-' || (g % $2), 'Payments.Load', 'k' || g, '\x00', 'done', now() - interval '2 days', now() - interval '1 day'
FROM generate_series(1, $1::bigint) AS g`, keys, scopes); err != nil {
		return fmt.Errorf("load %d keys: %w", keys, err)
	}
	loaded := time.Since(t0)
	rows, err := db.Pool.Query(ctx, `SELECT s.shardid, p.nodename || ':' || p.nodeport, r.result::bigint
FROM run_command_on_shards('idempotency_keys', 'SELECT count(*) FROM %s') AS r
JOIN pg_dist_shard s USING (shardid) JOIN pg_dist_shard_placement p USING (shardid) ORDER BY s.shardid`)
	if err != nil {
		return fmt.Errorf("count rows per shard: %w", err)
	}
	var counts []int64
	perNode := map[string]int64{}
	for rows.Next() {
		var id, n int64
		var node string
		if err := rows.Scan(&id, &node, &n); err != nil {
			return err
		}
		counts = append(counts, n)
		perNode[node] += n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Citus: %d keys over %d scopes (loaded in %s)\n\n", keys, scopes, loaded.Round(time.Second))
	fmt.Fprintf(w, "%s\n", balance("shards", counts))
	var nodes []int64
	for _, n := range perNode {
		nodes = append(nodes, n)
	}
	fmt.Fprintf(w, "%s\n", balance("nodes", nodes))

	// Live claims, before and during a sweep of every expired key.
	live := func(prefix string) op {
		m := &idem.Method[Receipt]{Name: "Payments.Live", Retention: retention}
		fp := fingerprint()
		return func(ctx context.Context, i int) error {
			tenant := "scope-" + strconv.Itoa(i%scopes)
			ctx = idem.ContextWithKey(idem.ContextWithScope(ctx, tenant), prefix+strconv.Itoa(i))
			_, err := idem.Atomic(ctx, s, m, fp, func(ctx context.Context, tx pgx.Tx) (Receipt, error) { return citusPayment(ctx, tx, tenant) })
			return err
		}
	}
	c := b.cfg.sweepConcurrency
	before, err := measure(ctx, live("b"), &counter{}, c, load{duration: b.cfg.sweepBefore})
	if err != nil {
		return fmt.Errorf("claims before the sweep: %w", err)
	}
	done := make(chan struct{})
	var swept atomic.Int64
	var sweepErr error
	var took time.Duration
	go func() {
		defer close(done)
		t0 := time.Now()
		n, err := s.Sweep(ctx, 0)
		took, sweepErr = time.Since(t0), err
		swept.Store(n)
	}()
	during, err := measure(ctx, live("d"), &counter{}, c, load{until: done})
	<-done
	if err != nil {
		return fmt.Errorf("claims during the sweep: %w", err)
	}
	if sweepErr != nil {
		return fmt.Errorf("sweep: %w", sweepErr)
	}
	fmt.Fprintf(w, "\nThe sweep per shard deleted %d rows in %s (share %.2f, batches of %d); live claims at %d goroutines:\n\n",
		swept.Load(), took.Round(time.Millisecond), idem.DefaultSweepShare, idem.DefaultSweepBatch, c)
	fmt.Fprintln(w, "| claims | calls | p50 µs | p99 µs | calls/s |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, r := range []struct {
		name string
		r    result
	}{{"before the sweep", before}, {"during the sweep", during}} {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.0f |\n", r.name, r.r.ops, micros(r.r.p50), micros(r.r.p99), r.r.throughput())
	}
	fmt.Fprintf(w, "\np99 during ÷ before: %.2f\n", float64(during.p99)/float64(before.p99))
	return nil
}

// balance says how far the largest and the smallest of counts are from
// their mean.
func balance(what string, counts []int64) string {
	if len(counts) == 0 {
		return what + ": none"
	}
	var sum int64
	for _, n := range counts {
		sum += n
	}
	mean := float64(sum) / float64(len(counts))
	lo, hi := slices.Min(counts), slices.Max(counts)
	return fmt.Sprintf("%d %s: mean %.0f rows, smallest %d (%+.1f%%), largest %d (%+.1f%%)",
		len(counts), what, mean, lo, 100*(float64(lo)-mean)/mean, hi, 100*(float64(hi)-mean)/mean)
}
