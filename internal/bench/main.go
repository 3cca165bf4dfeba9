// Command bench measures what idempotency costs: latency and throughput of
// the generated wrapper's paths against the work alone and the essay's
// hand-written spell, from 1 to 64 goroutines, on a PostgreSQL of its own
// (runtime/idemtest). It prints markdown tables and can draw a plot.
//
//	go run -C internal/bench . -png ../../docs/latency.png
//
// Experiments, chosen with -run (default latency):
//
//   - latency: every path at every concurrency: p50, p99, calls per
//     second, and the ratios to the spell; -png draws them.
//   - scale: claim and replay p50/p99 with the ledger already holding
//     -scale.rows rows (bulk-loaded with INSERT … SELECT generate_series);
//     -scale.prewarm reads it into shared buffers first.
//   - sweep: Sweep of -sweep.rows expired rows while live claims run: live
//     p99 before and during, table and index sizes, autovacuum settings;
//     -sweep.cycles loads and sweeps again to show the space is reused,
//     -sweep.autovacuum waits for autovacuum instead of running VACUUM.
//   - hot: the ledger's writes per claim (one insert, no update: the row is
//     written once) for each ledger fillfactor in -hot.fillfactors, with the
//     table's size.
//   - floors: each ledger path against its floor, the least its protocol
//     can cost: replay against lookup (one autocommit SELECT of the row),
//     claimed against floor (the work, the whole row sent with COMMIT),
//     external against xfloor (autocommit INSERT of an in-progress row,
//     the work, autocommit UPDATE finishing it), and claimed against plain.
//     -floors.runs runs, interleaved (run 1 of every path, then run 2 of
//     every path, …), at -floors.concurrency goroutines (1 and 16), each
//     run -ops calls (or -duration); it prints every run, then the medians
//     (p50, p99, calls/s, server CPU per call) and the ratios of the
//     medians, with the load average seen at each run.
//   - costs: per call of plain, spell, inline, claimed, replay, external,
//     lookup, floor and xfloor, what the server did: statements executed
//     (pg_stat_statements, BEGIN, COMMIT and ROLLBACK included; the
//     library is preloaded; PostgreSQL 15's misses a BEGIN or COMMIT sent
//     in a batch, so the statements the client sent are counted too, by a
//     pgx tracer), rows written (pg_stat_user_tables, flushed with
//     pg_stat_force_next_flush on a one-connection pool) and WAL bytes
//     inserted (pg_current_wal_insert_lsn, which unlike pg_current_wal_lsn
//     does not lag behind asynchronous commits), -costs.ops calls one at a
//     time with autovacuum off and nothing else running: figures the
//     machine's load cannot change. It runs after every other experiment;
//     the preloaded library costs those a little, every path alike.
//   - citus: on a Citus cluster of its own (a coordinator and
//     -citus.workers workers; the extension installed by
//     scripts/install-citus.sh), the ledger distributed by scope and a
//     tenant's payments and inline orders co-located with it: claimed,
//     replay, inline claimed and replay, and an inline call whose body also
//     writes another tenant's row, each against its floor on the cluster
//     (the work alone, an autocommit lookup of the row, the two-tenant work),
//     -citus.ops calls at each -citus.concurrency, with the two-phase
//     commits per call (pg_dist_transaction); then -citus.keys expired keys
//     over -citus.scopes scopes, how evenly the shards and the nodes hold
//     them, and live claims (-sweep.concurrency goroutines) for
//     -sweep.before, then during a sweep of every expired key per shard.
//
// Every ledger path against its floor, then what each costs the server:
//
//	go run -C internal/bench . -run floors,costs
//
// -cpuprofile writes a CPU profile of the client; -pgss preloads
// pg_stat_statements and prints, per path, where the server's time goes.
// The machine must be otherwise idle for the figures to mean anything; the
// load average is printed before and after.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// config is what one run measures.
type config struct {
	experiments []string
	paths       []string
	concurrency []int
	load        load
	png         string
	cpuProfile  string
	pgss        bool
	settings    []string

	scaleRows    []int
	scaleOps     int
	scalePrewarm bool

	sweepRows        int
	sweepConcurrency int
	sweepCycles      int
	sweepShare       float64
	sweepBefore      time.Duration
	sweepAutovacuum  time.Duration

	fillfactors []int
	hotOps      int

	floorsRuns        int
	floorsConcurrency []int
	costsOps          int

	citusWorkers     int
	citusShards      int
	citusOps         int
	citusConcurrency []int
	citusKeys        int
	citusScopes      int
}

// experiments are the -run values, in the order they run.
var experiments = []string{"latency", "scale", "sweep", "hot", "floors", "costs", "citus"}

func main() {
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into a config.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var (
		cfg                    config
		runs, paths, conc      string
		scaleRows, fillfactors string
		floorsConc, citusConc  string
		ops                    int
		duration               time.Duration
	)
	fs.StringVar(&runs, "run", "latency", "experiments to run, comma-separated: "+strings.Join(experiments, ", "))
	fs.StringVar(&paths, "paths", strings.Join(pathNames(), ","), "paths the latency experiment measures, comma-separated")
	fs.StringVar(&conc, "concurrency", "1,2,4,8,16,32,64", "goroutine counts, comma-separated")
	fs.IntVar(&ops, "ops", 3000, "calls per path and concurrency (latency experiment)")
	fs.DurationVar(&duration, "duration", 0, "run each path and concurrency this long instead of -ops calls")
	fs.StringVar(&cfg.png, "png", "", "draw the latency experiment into this PNG file")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the client to this file")
	fs.BoolVar(&cfg.pgss, "pgss", false, "preload pg_stat_statements and print where the server's time goes, per path")
	fs.Func("pg", "a server setting name=value for the throwaway PostgreSQL, as for postgres -c (repeatable), e.g. -pg shared_buffers=4GB", func(kv string) error {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return fmt.Errorf("%q is not name=value", kv)
		}
		cfg.settings = append(cfg.settings, kv)
		return nil
	})
	fs.StringVar(&scaleRows, "scale.rows", "0,1000000,10000000", "ledger sizes of the scale experiment, comma-separated")
	fs.IntVar(&cfg.scaleOps, "scale.ops", 3000, "claims and replays measured at each ledger size")
	fs.BoolVar(&cfg.scalePrewarm, "scale.prewarm", false, "read the loaded ledger into shared buffers before measuring it (pg_prewarm; give the server room with -pg shared_buffers=…)")
	fs.IntVar(&cfg.sweepRows, "sweep.rows", 1000000, "expired rows the sweep experiment deletes")
	fs.IntVar(&cfg.sweepConcurrency, "sweep.concurrency", 4, "goroutines of live claims during the sweep experiment")
	fs.Float64Var(&cfg.sweepShare, "sweep.share", idem.DefaultSweepShare, "share of its time the sweep spends deleting (idem.WithSweepShare; 1: flat out)")
	fs.IntVar(&cfg.sweepCycles, "sweep.cycles", 2, "load-and-sweep cycles of the sweep experiment")
	fs.DurationVar(&cfg.sweepBefore, "sweep.before", 10*time.Second, "how long live claims are measured before each sweep")
	fs.DurationVar(&cfg.sweepAutovacuum, "sweep.autovacuum", 0, "after each sweep wait up to this long for autovacuum to vacuum the ledger, instead of running VACUUM")
	fs.StringVar(&fillfactors, "hot.fillfactors", "100,90,80", "ledger fillfactors the hot experiment compares, comma-separated")
	fs.IntVar(&cfg.hotOps, "hot.ops", 20000, "claims per fillfactor in the hot experiment")
	fs.IntVar(&cfg.floorsRuns, "floors.runs", 3, "interleaved runs of the floors experiment, whose medians it reports")
	fs.StringVar(&floorsConc, "floors.concurrency", "1,16", "goroutine counts of the floors experiment, comma-separated; its ratios are at the first and the last")
	fs.IntVar(&cfg.costsOps, "costs.ops", 1000, "calls per path counted by the costs experiment")
	fs.IntVar(&cfg.citusWorkers, "citus.workers", 2, "workers of the citus experiment's cluster")
	fs.IntVar(&cfg.citusShards, "citus.shards", 32, "shards of each distributed table in the citus experiment (citus.shard_count; 32 is Citus's default)")
	fs.IntVar(&cfg.citusOps, "citus.ops", 1000, "calls per path and concurrency in the citus experiment")
	fs.StringVar(&citusConc, "citus.concurrency", "1,8", "goroutine counts of the citus experiment, comma-separated")
	fs.IntVar(&cfg.citusKeys, "citus.keys", 1000000, "expired keys the citus experiment loads, checks the shards' balance of and sweeps per shard (0: none)")
	fs.IntVar(&cfg.citusScopes, "citus.scopes", 10000, "scopes the citus experiment's keys spread over")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.load = load{ops: ops, duration: duration}
	if ops < 1 && duration <= 0 {
		return cfg, errors.New("-ops must be at least 1 (or give -duration)")
	}
	cfg.experiments = split(runs)
	for _, e := range cfg.experiments {
		if !slices.Contains(experiments, e) {
			return cfg, fmt.Errorf("-run: unknown experiment %q: use %s", e, strings.Join(experiments, ", "))
		}
	}
	cfg.paths = split(paths)
	for _, p := range cfg.paths {
		if !slices.Contains(pathNames(), p) {
			return cfg, fmt.Errorf("-paths: unknown path %q: use %s", p, strings.Join(pathNames(), ", "))
		}
	}
	var err error
	if cfg.concurrency, err = ints("-concurrency", conc, 1); err != nil {
		return cfg, err
	}
	if cfg.scaleRows, err = ints("-scale.rows", scaleRows, 0); err != nil {
		return cfg, err
	}
	if cfg.fillfactors, err = ints("-hot.fillfactors", fillfactors, 10); err != nil {
		return cfg, err
	}
	if cfg.floorsConcurrency, err = ints("-floors.concurrency", floorsConc, 1); err != nil {
		return cfg, err
	}
	if cfg.citusConcurrency, err = ints("-citus.concurrency", citusConc, 1); err != nil {
		return cfg, err
	}
	if cfg.citusWorkers < 1 || cfg.citusShards < 1 || cfg.citusOps < 1 || cfg.citusKeys < 0 || cfg.citusScopes < 1 {
		return cfg, errors.New("-citus.workers, -citus.shards, -citus.ops and -citus.scopes must be at least 1, -citus.keys at least 0")
	}
	if cfg.floorsRuns < 1 || cfg.costsOps < 1 {
		return cfg, errors.New("-floors.runs and -costs.ops must be at least 1")
	}
	for _, f := range cfg.fillfactors {
		if f > 100 {
			return cfg, fmt.Errorf("-hot.fillfactors: %d is over 100", f)
		}
	}
	if cfg.scaleOps < 1 || cfg.hotOps < 1 || cfg.sweepConcurrency < 1 || cfg.sweepCycles < 1 || cfg.sweepRows < 0 || cfg.sweepBefore <= 0 {
		return cfg, errors.New("-scale.ops, -hot.ops, -sweep.concurrency and -sweep.cycles must be at least 1, -sweep.rows at least 0, -sweep.before positive")
	}
	if !(cfg.sweepShare > 0 && cfg.sweepShare <= 1) {
		return cfg, fmt.Errorf("-sweep.share %g must be above 0 and at most 1", cfg.sweepShare)
	}
	return cfg, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ints parses a comma-separated list of integers of at least lo.
func ints(flagName, s string, lo int) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < lo {
			return nil, fmt.Errorf("%s: %q is not an integer of at least %d", flagName, f, lo)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flagName)
	}
	return out, nil
}

func pathNames() []string {
	var names []string
	for _, p := range allPaths() {
		names = append(names, p.name)
	}
	return names
}

// run starts the server, runs the experiments and stops the server.
func run(ctx context.Context, w io.Writer, cfg config) (err error) {
	var opts []idemtest.ServerOption
	if len(cfg.settings) > 0 {
		opts = append(opts, idemtest.WithSettings(cfg.settings...))
	}
	if cfg.pgss || slices.Contains(cfg.experiments, "costs") {
		opts = append(opts, idemtest.WithSettings("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on"))
	}
	srv, err := idemtest.Start(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.Stop(); err == nil {
			err = serr
		}
	}()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("cpuprofile: %w", cerr)
			}
		}()
	}
	b := &bench{srv: srv, w: w, cfg: cfg}
	if err := b.header(ctx); err != nil {
		return err
	}
	for _, e := range experiments {
		if !slices.Contains(cfg.experiments, e) {
			continue
		}
		var err error
		switch e {
		case "latency":
			err = b.latency(ctx)
		case "scale":
			err = b.scale(ctx)
		case "sweep":
			err = b.sweep(ctx)
		case "hot":
			err = b.hot(ctx)
		case "floors":
			err = b.floors(ctx)
		case "costs":
			err = b.costs(ctx)
		case "citus":
			err = b.citus(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", e, err)
		}
	}
	fmt.Fprintf(w, "\nload average at the end: %s\n", loadAverage())
	return nil
}

// bench holds what the experiments share.
type bench struct {
	srv     *idemtest.Server
	w       io.Writer
	cfg     config
	version string // the server's major version, from header
}

// header prints what the figures were measured on.
func (b *bench) header(ctx context.Context) error {
	db, err := b.srv.NewDB(ctx, "bench_version", idemtest.WithoutLedger())
	if err != nil {
		return err
	}
	defer db.Close()
	var full, fsync, syncCommit, buffers, huge string
	if err := db.Pool.QueryRow(ctx, `SELECT (current_setting('server_version_num')::int / 10000)::text, current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'), current_setting('shared_buffers'), current_setting('huge_pages')`).Scan(&b.version, &full, &fsync, &syncCommit, &buffers, &huge); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	fmt.Fprintf(b.w, "PostgreSQL %s on a unix socket (fsync=%s, synchronous_commit=%s, shared_buffers=%s, huge_pages=%s); %d CPUs, GOMAXPROCS %d, %s; load average at the start: %s\n",
		full, fsync, syncCommit, buffers, huge, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadAverage())
	return nil
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// newDB creates the database of one path, with pg_stat_statements when -pgss.
func (b *bench) newDB(ctx context.Context, name string, opts ...idemtest.Option) (*idemtest.DB, error) {
	db, err := b.srv.NewDB(ctx, "bench_"+name, opts...)
	if err != nil {
		return nil, err
	}
	if b.cfg.pgss {
		if _, err := db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	return db, nil
}

// latency measures every path at every concurrency.
func (b *bench) latency(ctx context.Context) error {
	fmt.Fprintf(b.w, "\n## Latency and throughput against concurrency\n\n")
	var results []result
	for _, p := range allPaths() {
		if !slices.Contains(b.cfg.paths, p.name) {
			continue
		}
		rs, err := b.measurePath(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		results = append(results, rs...)
	}
	fmt.Fprintln(b.w)
	for _, p := range allPaths() {
		if slices.Contains(b.cfg.paths, p.name) {
			fmt.Fprintf(b.w, "- %s: %s\n", p.name, p.desc)
		}
	}
	fmt.Fprintln(b.w)
	writeTable(b.w, results)
	if b.cfg.png != "" {
		title := fmt.Sprintf("idemgen: one INSERT per call in a transaction; PostgreSQL %s on a unix socket; %d CPUs; load average %s when the plot was drawn",
			b.version, runtime.NumCPU(), loadAverage())
		if err := writePlot(b.cfg.png, title, b.cfg.paths, results); err != nil {
			return err
		}
		fmt.Fprintf(b.w, "\nplot written to %s\n", b.cfg.png)
	}
	return nil
}

// measurePath runs one path at every concurrency on a database of its own.
func (b *bench) measurePath(ctx context.Context, p path) (_ []result, err error) {
	opts, err := p.opts()
	if err != nil {
		return nil, err
	}
	db, err := b.newDB(ctx, p.name, opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	fn, err := p.prepare(ctx, db, b.cfg.load.ops)
	if err != nil {
		return nil, err
	}
	if b.cfg.pgss {
		if err := resetStatements(ctx, db); err != nil {
			return nil, err
		}
	}
	var keys counter
	var results []result
	for _, c := range b.cfg.concurrency {
		r, err := b.measureOnce(ctx, db, fn, &keys, c)
		if err != nil {
			return nil, err
		}
		r.path = p.name
		results = append(results, r)
		fmt.Fprintf(b.w, "%-8s %3d goroutines: %6d calls, p50 %6sµs, p99 %6sµs, %7.0f calls/s, CPU %sµs per call (server %sµs)\n",
			p.name, c, r.ops, micros(r.p50), micros(r.p99), r.throughput(), micros(r.cpu), micros(r.serverCPU))
	}
	if b.cfg.pgss {
		if err := writeStatements(ctx, b.w, db, p.name, keys.n.Load()); err != nil {
			return nil, err
		}
	}
	if p.ledger != "" {
		st, err := tableStats(ctx, db, p.ledger, keys.n.Load())
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(b.w, "%-8s ledger after %d claims: %s\n", p.name, keys.n.Load(), st)
	}
	return results, nil
}
