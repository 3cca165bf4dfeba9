package effectscorpus_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// casesDir holds one package per case.
const casesDir = "testdata/cases"

// caseOf finds the case a diagnostic's file belongs to.
var caseOf = regexp.MustCompile(`testdata/cases/([a-z0-9_]+)/`)

// expectations reads each case's "Expect: accepted|refused" line.
func expectations(t *testing.T) map[string]bool {
	t.Helper()
	dirs, err := os.ReadDir(casesDir)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, d := range dirs {
		src, err := os.ReadFile(filepath.Join(casesDir, d.Name(), d.Name()+".go"))
		require.NoError(t, err)
		switch {
		case bytes.Contains(src, []byte("// Expect: refused\n")):
			out[d.Name()] = true
		case bytes.Contains(src, []byte("// Expect: accepted\n")):
			out[d.Name()] = false
		default:
			t.Fatalf("case %s has no Expect line", d.Name())
		}
	}
	return out
}

// refusedBy collects the cases named by the lines of a runner's output
// that are effect diagnostics.
func refusedBy(out string) map[string][]string {
	got := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "runs in a transaction") && !strings.Contains(line, "is atomic, but") {
			continue
		}
		if m := caseOf.FindStringSubmatch(line); m != nil {
			got[m[1]] = append(got[m[1]], line)
		}
	}
	return got
}

// TestCorpus runs the generator, idemvet on its own and go vet
// -vettool=idemvet on every case, and checks each runner's verdict
// against the case's: no accepted case refused, every escaping case
// refused, and the three runners agreeing.
func TestCorpus(t *testing.T) {
	want := expectations(t)
	require.GreaterOrEqual(t, len(want), 40)

	// The generator and idemvet, built from this checkout and run as
	// commands (the test binary's -race would slow the generator's walk
	// tenfold, and users run them as commands). -trimpath keeps the
	// checkout's directory out of the binaries: go vet keys the facts it
	// caches for every dependency (the SDKs, each walked in SSA form) by
	// the vet tool's content, so the same source checked out anywhere
	// else (CI's fresh clone) reuses them instead of walking every SDK
	// again.
	dir := t.TempDir()
	idemgen, bin := filepath.Join(dir, "idemgen"), filepath.Join(dir, "idemvet")
	run(t, 0, "go", "build", "-trimpath", "-o", idemgen, "github.com/idemgen/idemgen/cmd/idemgen")
	run(t, 0, "go", "build", "-trimpath", "-o", bin, "github.com/idemgen/idemgen/cmd/idemvet")

	// go generate's verdict: idemgen -check regenerates every case in
	// memory; its other lines say the cases' outputs are not committed.
	out := run(t, 1, idemgen, "-check", "./"+casesDir+"/...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.True(t, strings.Contains(line, "is atomic, but") || strings.Contains(line, ": missing: run go generate") || strings.HasPrefix(line, "idemgen: "),
			"not an effect refusal: %s", line)
	}
	generator := refusedBy(out)
	standalone := refusedBy(run(t, 3, bin, "-effects", "./"+casesDir+"/..."))
	vet := refusedBy(run(t, 1, "go", "vet", "-vettool="+bin, "-effects", "./"+casesDir+"/..."))

	verdict := func(refused map[string][]string, c string) string {
		if len(refused[c]) > 0 {
			return "refused"
		}
		return "accepted"
	}
	names := make([]string, 0, len(want))
	for c := range want {
		names = append(names, c)
	}
	sort.Strings(names)
	var table strings.Builder
	table.WriteString("| case | expected | go generate | idemvet | go vet -vettool |\n| --- | --- | --- | --- | --- |\n")
	escaping, caught := 0, map[string]int{}
	for _, c := range names {
		exp := "accepted"
		if want[c] {
			exp = "refused"
			escaping++
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %s | %s |\n", c, exp, verdict(generator, c), verdict(standalone, c), verdict(vet, c))
		for runner, got := range map[string]map[string][]string{"go generate": generator, "idemvet": standalone, "go vet": vet} {
			if want[c] && len(got[c]) > 0 {
				caught[runner]++
			}
		}
	}
	t.Logf("corpus verdicts:\n%s", table.String())
	for _, c := range names {
		for runner, got := range map[string]map[string][]string{"go generate": generator, "idemvet": standalone, "go vet": vet} {
			if !want[c] {
				require.Empty(t, got[c], "%s refuses %s, an accepted case (a false positive)", runner, c)
			}
			for _, line := range got[c] {
				require.NotContains(t, line, "(-)", "%s prints no position: %s", runner, line)
			}
		}
		require.Equal(t, verdict(generator, c), verdict(standalone, c), "idemvet and go generate disagree on %s", c)
		require.Equal(t, verdict(generator, c), verdict(vet, c), "go vet and go generate disagree on %s", c)
	}
	for runner, n := range caught {
		require.GreaterOrEqual(t, n*100, escaping*95, "%s refuses %d of %d escaping cases", runner, n, escaping)
	}
	require.Len(t, caught, 3, "a runner refuses no case")
}

// run runs a command in the module's directory and returns its combined
// output, failing the test on an exit code other than 0 or ok.
func run(t *testing.T, ok int, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err, "%s %s", name, strings.Join(args, " "))
	}
	require.Contains(t, []int{0, ok}, code, "%s %s: exit %d\n%s", name, strings.Join(args, " "), code, out.String())
	return out.String()
}
