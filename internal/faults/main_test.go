package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

var long = flag.Bool("faults.long", false, "run the scenarios with bigger counts and print the figures as a markdown table")

// suite is what every scenario shares: the server, the fault proxy's API and
// the figures printed at the end. It is package state because TestMain owns
// it: the server takes seconds to start and outlives every test.
var suite struct {
	pg    *pgserver.Server
	toxic *toxiproxy.ApiServer

	bouncerOnce sync.Once
	bouncer     *pgserver.Bouncer
	bouncerErr  error

	// citus is the Citus cluster of the Citus scenarios (citusServer).
	citusOnce sync.Once
	citus     *idemtest.Server
	citusErr  error

	mu      sync.Mutex
	figures []figures
}

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain())
	}
	if os.Getenv(natsWorkerEnv) != "" {
		os.Exit(natsWorkerMain())
	}
	if os.Getenv(riverWorkerEnv) != "" {
		os.Exit(riverWorkerMain())
	}
	if os.Getenv(riverRecoveryEnv) != "" {
		os.Exit(riverRecoveryWorkerMain())
	}
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pg, err := startPostgres(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := pg.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	suite.pg = pg
	// idemtest makes each test's fresh database, with the ledger, on this
	// server.
	if err := os.Setenv(idemtest.EnvDatabaseURL, pg.URL("postgres")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.toxic = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	code := m.Run()
	if suite.bouncer != nil {
		if err := suite.bouncer.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if suite.citus != nil {
		if err := suite.citus.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	printTable()
	return code
}

// record keeps a scenario's figures for the table printed at the end.
func record(f figures) {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	suite.figures = append(suite.figures, f)
}

// printTable prints, in long or verbose mode, every scenario's figures as the
// markdown table of docs/guarantees.md's "Guarantees and limits" section.
func printTable() {
	if !*long && !testing.Verbose() {
		return
	}
	suite.mu.Lock()
	defer suite.mu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | calls | intentions | effects | outcome unknown | replays | in progress | errors by kind | max latency |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, f := range suite.figures {
		if f.calls == 0 && f.intentions == 0 {
			continue // a scenario with figures of its own, checked for linearizability only
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s | %s |\n",
			f.name, f.calls, f.intentions, f.effects, f.unknown, f.replays, f.inProgress, f.errorsText(), f.maxLatency.Round(time.Millisecond))
	}
	b.WriteString("\n| scenario | operations checked | keys | checker time | linearizable |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- |\n")
	for _, f := range suite.figures {
		if f.linear.Verdict == "" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", f.name, f.linear.Operations, f.linear.Keys, f.linear.Took.Round(time.Millisecond), f.linear.Verdict)
	}
	fmt.Println()
	fmt.Print(b.String())
}

// errorsText renders errors by kind, sorted, e.g. "store 12, deadline 3".
func (f figures) errorsText() string {
	var kinds []string
	for k := range f.errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, f.errors[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
