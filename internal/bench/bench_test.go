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
	assert.Contains(t, out.String(), "| `INSERT INTO \"idempotency_keys\"", "the claim appears among the server's statements")
	assert.Regexp(t, `(?m)^\| spell \| 1 \| 4 \| \d+ \| \d+ \| \d+ \| 1\.00 \| 1\.00 \| `, out.String(), "the spell is its own baseline")
	// Every claim was counted: at 1 goroutine 2 warm-up calls and 4
	// measured, at 2 goroutines 4 and 4.
	assert.Regexp(t, `(?m)^claimed  ledger after 14 claims: 14 inserts, 14 updates of which \d+ HOT`, out.String())
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
		assert.Regexp(t, `(?m)^\| `+itoa(ff)+` \| `+itoa(cfg.hotOps)+` \| `+itoa(cfg.hotOps)+` \| \d+ \| [0-9.]+% \|`, s, "fillfactor %d: one response write per claim", ff)
	}
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
	assert.GreaterOrEqual(t, cpu1, cpu0)
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
