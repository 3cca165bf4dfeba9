package mutation

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultMutants are the mutations whose fault-suite history must be
// reported not linearizable: each breaks what a replay answers, which the
// 256-way twins scenario of internal/faults (TestTwins256, on pgx) shows to
// the linearizability checker (internal/faults/linear). The mutants'
// generated tests are TestGeneratedTestsCatchMutations's; this is the same
// bug seen by the other suite's checker.
var faultMutants = map[string]string{
	// Every retry runs the body again: a fresh answer after the key's
	// answer was acknowledged.
	"d_response_not_replayed": "TestTwins256/pgx",
	// A replay answers the zero value: a replay of a value nobody committed.
	"g_replay_decoded_to_zero": "TestTwins256/pgx",
}

// keepPictures keeps the pictures of the mutants' histories (one file per
// mutant, in a directory named after it), for docs/guarantees.md's example.
var keepPictures = flag.String("fault-pictures", "", "keep porcupine's pictures of the fault suite's histories under the mutants in this directory")

// notLinearizable is the fault suite's failure message for a history that
// is not linearizable (linear.Result.Err), naming the picture.
var notLinearizable = regexp.MustCompile(`not linearizable: \d+ of \d+ keys \([^)]*\); porcupine's picture of \d+ of them: (\S+\.html)`)

// TestFaultHistoriesCatchMutations runs a fault scenario (internal/faults,
// its own module) against each mutant of faultMutants, with go test
// -overlay as TestGeneratedTestsCatchMutations does, and asserts that the
// scenario fails because its history is not linearizable, with porcupine's
// picture written where the message says. The unmutated scenario passes in
// the fault suite's own run.
func TestFaultHistoriesCatchMutations(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Logf("%s is set: this is a go test started by this test, which does not run itself again", envChild)
		return
	}
	root := repoRoot(t)
	byName := map[string]mutation{}
	for _, m := range mutations() {
		byName[m.name] = m
	}
	for name, scenario := range faultMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, ok := byName[name]
			require.True(t, ok, "no mutation %s", name)
			dir := t.TempDir()
			overlay := mutate(t, root, dir, m)
			pictures := filepath.Join(dir, "pictures")
			if *keepPictures != "" {
				pictures = filepath.Join(*keepPictures, name)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			test, sub, _ := strings.Cut(scenario, "/")
			cmd := goCommand(ctx, filepath.Join(root, "internal", "faults"), "test", "-vet=off", "-count=1",
				"-overlay="+overlay, "-run", "^"+regexp.QuoteMeta(test)+"$/^"+regexp.QuoteMeta(sub)+"$", ".",
				"-args", "-faults.pictures="+pictures)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s passed under mutation %s (%s):\n%s", scenario, name, m.bug, out)
			match := notLinearizable.FindSubmatch(out)
			require.NotNil(t, match, "%s failed under mutation %s, but not for a history that is not linearizable:\n%s", scenario, name, out)
			picture := string(match[1])
			assert.FileExists(t, picture)
			t.Logf("%s: %s caught it: %s", name, scenario, match[0])
		})
	}
}
