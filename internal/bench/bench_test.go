package main

import (
	"bytes"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// long runs the scale and sweep experiments at the sizes the performance
// targets are stated for. It takes a long time (tens of minutes at 10M rows)
// and needs an otherwise idle machine for its figures to mean anything:
//
//	go test -run Scale -bench.long -timeout 3h ./...   (in internal/bench)
var long = flag.Bool("bench.long", false, "run the scale experiment at 0, 1M and 10M rows and sweep 1M rows, printing the tables")

// These tests run the command in its smallest setting: they check that every
// experiment runs and reports, never how fast (CI's machine is loaded).

func TestLatencyReportsEveryPathAndDrawsThePlot(t *testing.T) {
	dir := t.TempDir()
	cfg := defaults(t)
	cfg.concurrency = []int{1, 2}
	cfg.load = load{ops: 4}
	cfg.png = filepath.Join(dir, "latency.png")
	cfg.cpuProfile = filepath.Join(dir, "cpu.pprof")
	cfg.pgss = true
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, cfg))
	t.Log(out.String())

	for _, p := range pathNames() {
		for _, c := range []string{"1", "2"} {
			assert.Regexp(t, `(?m)^\| `+p+` \| `+c+` \| 4 \| \d+ \| \d+ \| \d+ \| [0-9.]+ \| [0-9.]+ \| (\d+|–) \| ([0-9.]+|–) \| (\d+|–) \|$`, out.String(), "row of %s at %s goroutines", p, c)
		}
		// pg_stat_statements saw the path's statements.
		assert.Regexp(t, `(?m)^`+p+`: server time \(pg_stat_statements`, out.String())
	}
	assert.Contains(t, out.String(), "| `INSERT INTO \"idempotency_keys\" AS t (scope, method, key, fingerprint, status, response", "the record statement appears among the server's statements")
	assert.Regexp(t, `(?m)^\| spell \| 1 \| 4 \| \d+ \| \d+ \| \d+ \| 1\.00 \| 1\.00 \| `, out.String(), "the spell is its own baseline")
	// Every claim was counted: at 1 goroutine 20 warm-up calls and 4
	// measured, at 2 goroutines 40 and 4 (warmUp).
	assert.Regexp(t, `(?m)^claimed  ledger after 68 claims: 68 inserts, 0 updates of which 0 HOT`, out.String())
	assert.Regexp(t, `load average at the start: \S+ \S+ \S+`, out.String())

	f, err := os.Open(cfg.png)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.DecodeConfig(f)
	require.NoError(t, err)
	assert.Equal(t, 1600, img.Width)
	assert.Equal(t, 560, img.Height)

	prof, err := os.ReadFile(cfg.cpuProfile)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(prof, []byte{0x1f, 0x8b}), "the CPU profile is a gzipped pprof profile")
}

func TestScaleSweepAndHot(t *testing.T) {
	cfg := defaults(t)
	cfg.experiments = []string{"scale", "sweep", "hot"}
	cfg.scaleRows, cfg.scaleOps = []int{0, 2000}, 20
	cfg.sweepRows, cfg.sweepConcurrency, cfg.sweepBefore = 2000, 2, 100*time.Millisecond
	cfg.fillfactors, cfg.hotOps = []int{100, 90}, 50
	if *long {
		cfg.scaleRows, cfg.scaleOps = []int{0, 1_000_000, 10_000_000}, 3000
		cfg.sweepRows, cfg.sweepConcurrency, cfg.sweepBefore = 1_000_000, 4, 10*time.Second
		cfg.fillfactors, cfg.hotOps = []int{100, 90, 80}, 20000
	}
	var out bytes.Buffer
	w := io.Writer(&out)
	if *long {
		w = io.MultiWriter(&out, os.Stdout)
	}
	require.NoError(t, run(t.Context(), w, cfg))
	if !*long {
		t.Log(out.String())
	}
	s := out.String()

	for _, n := range cfg.scaleRows {
		for _, p := range []string{"claimed", "replay"} {
			for _, c := range []string{"1", "16"} {
				assert.Regexp(t, `(?m)^\| `+itoa(n)+` \| `+p+` \| `+c+` \| `+itoa(cfg.scaleOps)+` \| \d+ \| \d+ \| \d+ \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+|n/a) \|$`, s, "scale row %d %s %s", n, p, c)
			}
		}
	}
	// Both sweeps delete exactly the expired rows, and leave the live ones.
	assert.Equal(t, 2, strings.Count(s, "Sweep deleted "+itoa(cfg.sweepRows)+" rows"), "each cycle's sweep deletes every expired row and nothing else")
	for _, stage := range []string{"empty", "cycle 1: loaded", "cycle 1: swept", "cycle 1: vacuumed", "cycle 2: loaded", "cycle 2: swept", "cycle 2: vacuumed"} {
		assert.Regexp(t, `(?m)^\| `+regexp.QuoteMeta(stage)+` \| \d+ \| \d+ \| [0-9.]+ [KM]iB \| [0-9.]+ [KM]iB \| [0-9.]+ [KM]iB \| \d+ \|$`, s)
	}
	assert.Regexp(t, `ledger storage settings: autovacuum_vacuum_scale_factor=`, s)
	for _, ff := range cfg.fillfactors {
		assert.Regexp(t, `(?m)^\| `+itoa(ff)+` \| `+itoa(cfg.hotOps)+` \| 0 \| 0 \| 0.0% \|`, s, "fillfactor %d: the row written once, never updated", ff)
	}
}

// TestFloorsAndCosts runs the floors and costs experiments at their
// smallest: every path and its floor appear in every table, and the server's
// counts per call are the protocol's (no timing is checked).
func TestFloorsAndCosts(t *testing.T) {
	cfg := defaults(t)
	cfg.experiments = []string{"floors", "costs"}
	cfg.load = load{ops: 4}
	cfg.floorsRuns = 2
	cfg.costsOps = 50
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, cfg))
	t.Log(out.String())
	s := out.String()

	for _, p := range floorsPaths {
		for _, c := range []string{"1", "16"} {
			for _, r := range []string{"1", "2"} {
				assert.Regexp(t, `(?m)^run `+r+` `+p+` +`+c+` goroutines: +4 calls, p50 +\d+µs`, s, "run %s of %s at %s goroutines", r, p, c)
			}
			assert.Regexp(t, `(?m)^\| `+p+` \| `+c+` \| 2 \| \d+ \| \d+ \| \d+ \| (\d+|–) \|$`, s, "median row of %s at %s goroutines", p, c)
		}
	}
	assert.Regexp(t, `(?m)^run 1 of 2, load average \S+ \S+ \S+$`, s)
	assert.Regexp(t, `at the start of each run, then at the end: \S+ \S+ \S+; \S+ \S+ \S+; \S+ \S+ \S+\.`, s, "the load average of both runs and of the end")
	assert.Contains(t, s, "| path ÷ floor | p50 at 1 | p50 at 16 | calls/s at 16 | server CPU at 16 |")
	for _, pair := range floorPairs {
		assert.Regexp(t, `(?m)^\| `+pair[0]+` ÷ `+pair[1]+` \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+|–) \|$`, s, "ratio of %s to %s", pair[0], pair[1])
	}

	costs := costRows(t, s)
	for _, p := range costsPaths {
		require.Contains(t, costs, p, "costs row of %s", p)
		assert.Equal(t, cfg.costsOps, int(costs[p][0]), "%s: calls", p)
	}
	const stmts, sent, rows, wal = 1, 2, 3, 4
	assert.Equal(t, 1.0, costs["lookup"][stmts], "lookup is one statement")
	assert.Equal(t, 1.0, costs["lookup"][sent], "lookup sends one statement")
	assert.Equal(t, 0.0, costs["lookup"][rows], "lookup writes nothing")
	assert.Equal(t, 3.0, costs["plain"][stmts], "plain: BEGIN, INSERT, COMMIT")
	assert.Equal(t, 3.0, costs["plain"][sent])
	assert.Equal(t, 1.0, costs["plain"][rows], "plain writes the payment")
	assert.Equal(t, 2.0, costs["floor"][rows], "floor writes the payment and the ledger row once")
	assert.Equal(t, 3.0, costs["xfloor"][rows], "xfloor inserts the ledger row, the payment, and updates the ledger row")
	assert.Equal(t, 5.0, costs["xfloor"][sent], "xfloor: INSERT, BEGIN, INSERT, COMMIT, UPDATE")
	assert.GreaterOrEqual(t, costs["claimed"][rows], 2.0, "claimed writes the payment and a ledger row")
	assert.GreaterOrEqual(t, costs["external"][rows], 2.0, "external writes the payment and a ledger row")
	assert.Equal(t, 0.0, costs["replay"][rows], "a replay writes no row")
	assert.Positive(t, costs["replay"][stmts], "a replay executes a statement")
	assert.Less(t, costs["replay"][wal], costs["claimed"][wal], "a replay writes less WAL than a claim")
	assert.Positive(t, costs["plain"][wal], "the work writes WAL")
	assert.GreaterOrEqual(t, costs["claimed"][wal], costs["plain"][wal], "a claim writes the work's WAL and more")
	// The paths written here send one statement per query or batch entry.
	for _, p := range []string{"plain", "spell", "lookup", "floor", "xfloor"} {
		assert.GreaterOrEqual(t, costs[p][sent], costs[p][stmts], "%s: the server counts no statement the client did not send", p)
	}
}

// costRows parses the costs table: per path, calls, statements, statements
// sent, rows written and WAL bytes per call.
func costRows(t *testing.T, s string) map[string][5]float64 {
	t.Helper()
	out := map[string][5]float64{}
	re := regexp.MustCompile(`(?m)^\| (\S+) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| (\d+) \| .*\|$`)
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		var row [5]float64
		for i := range row {
			v, err := strconv.ParseFloat(m[i+2], 64)
			require.NoError(t, err)
			row[i] = v
		}
		out[m[1]] = row
	}
	return out
}

// TestServerProcsAndBusyCPU checks the counters the figures divide by calls:
// the machine's busy CPU time grows, and the server's processes report page
// faults and CPU time that never shrink.
func TestServerProcsAndBusyCPU(t *testing.T) {
	srv, err := idemtest.Start(t.Context())
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	db, err := srv.NewDB(t.Context(), "procs", idemtest.WithoutLedger())
	require.NoError(t, err)
	defer db.Close()

	faults0, cpu0, ok, err := serverProcs(t.Context(), db)
	require.NoError(t, err)
	require.True(t, ok, "this machine's /proc shows the server's processes")
	assert.Positive(t, faults0, "a running server has taken page faults")
	busy0 := busyCPU()
	require.Positive(t, busy0)
	for range 200 {
		_, err := db.Pool.Exec(t.Context(), "SELECT count(*) FROM generate_series(1, 10000)")
		require.NoError(t, err)
	}
	faults1, cpu1, ok, err := serverProcs(t.Context(), db)
	require.NoError(t, err)
	require.True(t, ok)
	assert.GreaterOrEqual(t, faults1, faults0)
	assert.Greater(t, cpu1, cpu0, "200 queries of 10,000 rows each run on the server's CPU")
	_, exact := procCPU(int32(os.Getpid()))
	assert.True(t, exact, "this machine's kernel keeps a process's CPU time in nanoseconds (schedstat)")
	assert.Greater(t, busyCPU(), busy0, "200 queries keep a core busy for more than a tick")
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"latency"}, cfg.experiments)
	assert.Equal(t, pathNames(), cfg.paths)
	assert.Equal(t, []int{1, 2, 4, 8, 16, 32, 64}, cfg.concurrency)
	assert.Equal(t, []int{0, 1_000_000, 10_000_000}, cfg.scaleRows)
	assert.Empty(t, cfg.settings)
	assert.Equal(t, 3, cfg.floorsRuns)
	assert.Equal(t, []int{1, 16}, cfg.floorsConcurrency)
	assert.Equal(t, 1000, cfg.costsOps)

	cfg, err = parseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"-pg", "shared_buffers=1GB", "-pg", "work_mem=8MB"})
	require.NoError(t, err)
	assert.Equal(t, []string{"shared_buffers=1GB", "work_mem=8MB"}, cfg.settings)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-run", "latency,speed"}, `unknown experiment "speed"`},
		{[]string{"-paths", "claimed,nope"}, `unknown path "nope"`},
		{[]string{"-concurrency", "1,0"}, `-concurrency: "0" is not an integer of at least 1`},
		{[]string{"-hot.fillfactors", "120"}, "120 is over 100"},
		{[]string{"-ops", "0"}, "-ops must be at least 1"},
		{[]string{"-sweep.cycles", "0"}, "-sweep.cycles must be at least 1"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-floors.runs", "0"}, "-floors.runs and -costs.ops must be at least 1"},
		{[]string{"-costs.ops", "0"}, "-floors.runs and -costs.ops must be at least 1"},
		{[]string{"-floors.concurrency", ""}, "-floors.concurrency: empty list"},
		{[]string{"-sweep.share", "0"}, "-sweep.share 0 must be above 0"},
		{[]string{"-pg", "shared_buffers"}, `"shared_buffers" is not name=value`},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		_, err := parseFlags(fs, tc.args)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

// defaults is the command's configuration with no flags.
func defaults(t *testing.T) config {
	t.Helper()
	cfg, err := parseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), nil)
	require.NoError(t, err)
	return cfg
}

func itoa(n int) string { return strconv.Itoa(n) }
