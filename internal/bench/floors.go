package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// floorsPaths are the paths the floors experiment measures, in the order
// each run measures them.
var floorsPaths = []string{"lookup", "replay", "retry", "floor", "claimed", "lfclaimed", "xfloor", "external", "plain", "spell"}

// floorPairs are the ratios the floors experiment reports: each path
// divided by its floor (the plain work last: what claiming adds to the work
// itself).
var floorPairs = [][2]string{{"replay", "lookup"}, {"retry", "lookup"}, {"replay", "retry"}, {"claimed", "floor"}, {"lfclaimed", "floor"}, {"claimed", "lfclaimed"},
	{"external", "xfloor"}, {"claimed", "plain"}}

// costsPaths are the paths the costs experiment counts.
var costsPaths = []string{"plain", "spell", "inline", "claimed", "lfclaimed", "replay", "retry", "external", "lookup", "floor", "xfloor"}

// pathNamed returns the path called name.
func pathNamed(name string) (path, error) {
	for _, p := range allPaths() {
		if p.name == name {
			return p, nil
		}
	}
	return path{}, fmt.Errorf("no path %q", name)
}

// prepared is a path with its database set up and its operation ready.
type prepared struct {
	p    path
	db   *idemtest.DB
	fn   op
	keys counter
}

// measureOnce warms the path up at concurrency c (every connection the
// measurement uses open, its statements prepared) and measures it once,
// with the server's CPU time per call.
func (b *bench) measureOnce(ctx context.Context, db *idemtest.DB, fn op, keys *counter, c int) (result, error) {
	if _, err := measure(ctx, fn, keys, c, warmUp(c, b.cfg.load.ops)); err != nil {
		return result{}, err
	}
	_, cpu0, ok0, err := serverProcs(ctx, db)
	if err != nil {
		return result{}, err
	}
	r, err := measure(ctx, fn, keys, c, b.cfg.load)
	if err != nil {
		return result{}, err
	}
	_, cpu1, ok1, err := serverProcs(ctx, db)
	if err != nil {
		return result{}, err
	}
	if ok0 && ok1 {
		r.serverCPU = (cpu1 - cpu0) / time.Duration(r.ops)
	}
	return r, nil
}

// floors measures every ledger path and its floor, -floors.runs times,
// interleaved (run 1 of every path, then run 2 of every path, …) so that a
// change in the machine's load falls on every path alike, and reports the
// medians and each path's ratio to its floor.
func (b *bench) floors(ctx context.Context) (err error) {
	fmt.Fprintf(b.w, "\n## Every path against its floor\n\n")
	conc := b.cfg.floorsConcurrency
	var ps []*prepared
	defer func() {
		for _, p := range ps {
			if cerr := p.db.Close(); err == nil {
				err = cerr
			}
		}
	}()
	for _, name := range floorsPaths {
		p, err := pathNamed(name)
		if err != nil {
			return err
		}
		opts, err := p.opts()
		if err != nil {
			return err
		}
		db, err := b.newDB(ctx, "floors_"+name, opts...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ps = append(ps, &prepared{p: p, db: db})
		if ps[len(ps)-1].fn, err = p.prepare(ctx, db, b.cfg.load.ops); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	type at struct {
		path string
		c    int
	}
	runs := map[at][]result{}
	var loads []string
	for run := 1; run <= b.cfg.floorsRuns; run++ {
		la := loadAverage()
		loads = append(loads, la)
		fmt.Fprintf(b.w, "run %d of %d, load average %s\n", run, b.cfg.floorsRuns, la)
		for _, p := range ps {
			for _, c := range conc {
				r, err := b.measureOnce(ctx, p.db, p.fn, &p.keys, c)
				if err != nil {
					return fmt.Errorf("%s: %w", p.p.name, err)
				}
				r.path = p.p.name
				runs[at{p.p.name, c}] = append(runs[at{p.p.name, c}], r)
				fmt.Fprintf(b.w, "run %d %-8s %3d goroutines: %6d calls, p50 %6sµs, p99 %6sµs, %7.0f calls/s, server CPU %sµs per call\n",
					run, p.p.name, c, r.ops, micros(r.p50), micros(r.p99), r.throughput(), micros(r.serverCPU))
			}
		}
	}
	loads = append(loads, loadAverage())

	fmt.Fprintln(b.w)
	for _, name := range floorsPaths {
		p, _ := pathNamed(name)
		fmt.Fprintf(b.w, "- %s: %s\n", name, p.desc)
	}
	fmt.Fprintf(b.w, "\nMedians of %d interleaved runs; each figure's median is taken on its own. Load average (1, 5, 15 minutes) at the start of each run, then at the end: %s.\n\n",
		b.cfg.floorsRuns, strings.Join(loads, "; "))
	med := map[at]medianOf{}
	fmt.Fprintln(b.w, "| path | goroutines | runs | p50 µs | p99 µs | calls/s | server CPU µs per call |")
	fmt.Fprintln(b.w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, name := range floorsPaths {
		for _, c := range conc {
			rs := runs[at{name, c}]
			m := medianResult(rs)
			med[at{name, c}] = m
			server := "–"
			if m.serverCPU > 0 {
				server = micros(m.serverCPU)
			}
			fmt.Fprintf(b.w, "| %s | %d | %d | %s | %s | %.0f | %s |\n", name, c, len(rs), micros(m.p50), micros(m.p99), m.tput, server)
		}
	}
	lo, hi := conc[0], conc[len(conc)-1]
	fmt.Fprintf(b.w, "\nRatios of the medians (path ÷ its floor; above 1 the path is slower, or for calls/s faster):\n\n")
	fmt.Fprintf(b.w, "| path ÷ floor | p50 at %d | p50 at %d | calls/s at %d | server CPU at %d |\n", lo, hi, hi, hi)
	fmt.Fprintln(b.w, "| --- | ---: | ---: | ---: | ---: |")
	for _, pair := range floorPairs {
		p, f := pair[0], pair[1]
		fmt.Fprintf(b.w, "| %s ÷ %s | %s | %s | %s | %s |\n", p, f,
			ratio(float64(med[at{p, lo}].p50), float64(med[at{f, lo}].p50)),
			ratio(float64(med[at{p, hi}].p50), float64(med[at{f, hi}].p50)),
			ratio(med[at{p, hi}].tput, med[at{f, hi}].tput),
			ratio(float64(med[at{p, hi}].serverCPU), float64(med[at{f, hi}].serverCPU)))
	}
	return nil
}

// medianOf is the median of each figure of a path's runs at one
// concurrency, taken figure by figure.
type medianOf struct {
	p50, p99, serverCPU time.Duration
	tput                float64
}

func medianResult(rs []result) medianOf {
	pick := func(f func(result) float64) float64 {
		var v []float64
		for _, r := range rs {
			v = append(v, f(r))
		}
		return median(v)
	}
	return medianOf{
		p50:       time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:       time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		serverCPU: time.Duration(pick(func(r result) float64 { return float64(r.serverCPU) })),
		tput:      pick(result.throughput),
	}
}

// median returns the median of v (the mean of the middle two when their
// number is even), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratio formats a ÷ b, or a dash when either is unknown.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// cost is what the server did for one path's calls.
type cost struct {
	path       string
	calls      int
	statements int64 // pg_stat_statements executions, BEGIN, COMMIT and ROLLBACK included
	sent       int64 // statements the client sent, batched ones one by one
	rows       int64 // rows inserted, updated and deleted in the database's tables
	wal        int64 // bytes of WAL inserted
	byStmt     []stmtCount
}

// stmtCount is one statement's executions.
type stmtCount struct {
	query string
	calls int64
}

// costs counts, per call of each path, the statements the server executed,
// the rows it wrote and the WAL it inserted: figures the machine's load
// cannot change. Each path runs -costs.ops calls from one goroutine on a
// one-connection pool, on a database of its own with autovacuum off, and
// nothing else runs on the server meanwhile.
func (b *bench) costs(ctx context.Context) error {
	fmt.Fprintf(b.w, "\n## What the server does per call\n\n")
	fmt.Fprintf(b.w, "%d calls per path, one at a time, after a warm-up. Statements are the executions pg_stat_statements counted (utility statements too); "+
		"PostgreSQL 15's does not count a BEGIN or COMMIT sent with the extended protocol, as every statement of a batch is (the runtime and the floor send theirs so), "+
		"so the statements the client sent are counted too, each statement of a batch on its own. "+
		"Rows written are inserts, updates and deletes counted by pg_stat_user_tables; "+
		"WAL is the pg_current_wal_insert_lsn() delta, with nothing else running on the server.\n\n", b.cfg.costsOps)
	var all []cost
	for _, name := range costsPaths {
		p, err := pathNamed(name)
		if err != nil {
			return err
		}
		c, err := b.costOne(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, c)
	}
	writeCosts(b.w, all)
	return nil
}

// writeCosts prints the costs table.
func writeCosts(w io.Writer, all []cost) {
	fmt.Fprintln(w, "| path | calls | statements per call | statements sent per call | rows written per call | WAL bytes per call | statements (pg_stat_statements) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, c := range all {
		var parts []string
		for _, s := range c.byStmt {
			parts = append(parts, fmt.Sprintf("%s ×%s", s.query, perCall(s.calls, c.calls)))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d | %s |\n", c.path, c.calls, perCall(c.statements, c.calls), perCall(c.sent, c.calls), perCall(c.rows, c.calls),
			(c.wal+int64(c.calls)/2)/int64(c.calls), strings.Join(parts, ", "))
	}
}

// perCall formats n ÷ calls: an integer when it divides, else two decimals.
func perCall(n int64, calls int) string {
	if n%int64(calls) == 0 {
		return fmt.Sprint(n / int64(calls))
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(calls))
}

// costOne counts one path's costs.
func (b *bench) costOne(ctx context.Context, p path) (_ cost, err error) {
	opts, err := p.opts()
	if err != nil {
		return cost{}, err
	}
	// One connection: the statistics of every call are that backend's,
	// flushed on demand (pg_stat_force_next_flush).
	var sent sentCounter
	opts = append(opts, idemtest.WithPoolConfig(func(c *pgxpool.Config) {
		c.MaxConns, c.MinConns = 1, 0
		c.ConnConfig.Tracer = &sent
	}))
	db, err := b.srv.NewDB(ctx, "costs_"+p.name, opts...)
	if err != nil {
		return cost{}, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return cost{}, fmt.Errorf("pg_stat_statements (the costs experiment preloads it): %w", err)
	}
	// Autovacuum would write WAL of its own into the figures.
	rows, err := db.Pool.Query(ctx, `SELECT format('ALTER TABLE %s SET (autovacuum_enabled = off)', c.oid::regclass)
FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace`)
	if err != nil {
		return cost{}, err
	}
	var alters []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return cost{}, err
		}
		alters = append(alters, s)
	}
	if err := rows.Err(); err != nil {
		return cost{}, err
	}
	for _, s := range alters {
		if _, err := db.Pool.Exec(ctx, s); err != nil {
			return cost{}, fmt.Errorf("%s: %w", s, err)
		}
	}
	n := b.cfg.costsOps
	fn, err := p.prepare(ctx, db, n)
	if err != nil {
		return cost{}, err
	}
	var keys counter
	if _, err := measure(ctx, fn, &keys, 1, load{ops: 10}); err != nil {
		return cost{}, err
	}
	rows0, err := rowsWritten(ctx, db)
	if err != nil {
		return cost{}, err
	}
	if err := resetStatements(ctx, db); err != nil {
		return cost{}, err
	}
	var lsn0 string
	if err := db.Pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn0); err != nil {
		return cost{}, fmt.Errorf("WAL position: %w", err)
	}
	sent0 := sent.n.Load()
	if _, err := measure(ctx, fn, &keys, 1, load{ops: n}); err != nil {
		return cost{}, err
	}
	// A replay sends its ROLLBACK after the caller has its answer: the
	// connection comes back to the pool once it is done.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return cost{}, err
	}
	conn.Release()
	c := cost{path: p.name, calls: n, sent: sent.n.Load() - sent0}
	if err := db.Pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint", lsn0).Scan(&c.wal); err != nil {
		return cost{}, fmt.Errorf("WAL position: %w", err)
	}
	if c.byStmt, err = statementsExecuted(ctx, db); err != nil {
		return cost{}, err
	}
	for _, s := range c.byStmt {
		c.statements += s.calls
	}
	rows1, err := rowsWritten(ctx, db)
	if err != nil {
		return cost{}, err
	}
	c.rows = rows1 - rows0
	return c, nil
}

// rowsWritten returns the rows inserted, updated and deleted in db's tables
// so far, after flushing the statistics of the pool's connection (the
// pool has one: every call's counts are flushed).
func rowsWritten(ctx context.Context, db *idemtest.DB) (int64, error) {
	if _, err := db.Pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return 0, fmt.Errorf("flush statistics: %w", err)
	}
	var n int64
	if err := db.Pool.QueryRow(ctx, "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables").Scan(&n); err != nil {
		return 0, fmt.Errorf("rows written: %w", err)
	}
	return n, nil
}

// statementsExecuted returns the executions pg_stat_statements counted in
// db's database since its last reset, by statement (shortened), most
// executed first; the bench's own statements are left out.
func statementsExecuted(ctx context.Context, db *idemtest.DB) ([]stmtCount, error) {
	rows, err := db.Pool.Query(ctx, `
SELECT query, calls FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_current_wal_insert_lsn%'`)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer rows.Close()
	var out []stmtCount
	for rows.Next() {
		var s stmtCount
		if err := rows.Scan(&s.query, &s.calls); err != nil {
			return nil, fmt.Errorf("pg_stat_statements: %w", err)
		}
		s.query = "`" + shorten(s.query, 32) + "`"
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	slices.SortFunc(out, func(a, b stmtCount) int {
		return cmp.Or(cmp.Compare(b.calls, a.calls), strings.Compare(a.query, b.query))
	})
	return out, nil
}

// sentCounter counts the statements a pool's connections send: each query,
// and each statement of a batch (pipelined statements travel together but
// the server executes them one by one). Statement preparation is not
// counted.
type sentCounter struct{ n atomic.Int64 }

func (s *sentCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *sentCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *sentCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	s.n.Add(1)
}

func (s *sentCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
