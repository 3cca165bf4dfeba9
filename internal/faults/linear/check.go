package linear

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// pictured bounds how many failing keys a picture shows: enough to see the
// pattern, small enough to open in a browser.
const pictured = 8

// Result is a checked history's verdict.
type Result struct {
	// Operations is the number of operations checked (calls and final
	// reads); Keys the number of partitions.
	Operations, Keys int
	// Took is the checker's time.
	Took time.Duration
	// Verdict is porcupine's: Ok, Illegal, or Unknown (timed out).
	Verdict porcupine.CheckResult
	// Failing lists keys whose history is not linearizable.
	Failing []string
	// Picture is the path of porcupine's HTML visualization of the first
	// failing keys' histories, if the verdict is Illegal.
	Picture string
}

// Err is nil for a linearizable history and otherwise says what failed and
// where the picture is.
func (r Result) Err() error {
	switch r.Verdict {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("linearizability: the checker gave up after %s on %d operations over %d keys", r.Took.Round(time.Millisecond), r.Operations, r.Keys)
	}
	first := r.Failing
	if len(first) > pictured {
		first = first[:pictured]
	}
	return fmt.Errorf("not linearizable: %d of %d keys (%s); porcupine's picture of %d of them: %s",
		len(r.Failing), r.Keys, strings.Join(first, ", "), len(first), r.Picture)
}

// String is the result in one line, for logs.
func (r Result) String() string {
	return fmt.Sprintf("linearizability: %s, %d operations over %d keys checked in %s",
		r.Verdict, r.Operations, r.Keys, r.Took.Round(time.Millisecond))
}

// Check checks history with the model, one partition per key, giving up
// after timeout (0: never). If the history is not linearizable it writes
// porcupine's picture of the failing keys to dir (a new temporary directory
// if dir is empty), in a file named after name, and names it in the
// result.
func Check(name string, history []porcupine.Operation, dir string, timeout time.Duration) (Result, error) {
	m := Model()
	parts := m.Partition(history)
	start := time.Now()
	verdict := porcupine.CheckOperationsTimeout(m, history, timeout)
	res := Result{Operations: len(history), Keys: len(parts), Took: time.Since(start), Verdict: verdict}
	if verdict != porcupine.Illegal {
		return res, nil
	}
	var bad []porcupine.Operation
	for _, p := range parts {
		if porcupine.CheckOperations(m, p) {
			continue
		}
		res.Failing = append(res.Failing, p[0].Input.(Input).Key)
		if len(res.Failing) <= pictured {
			bad = append(bad, p...)
		}
	}
	_, info := porcupine.CheckOperationsVerbose(m, bad, 0)
	if dir == "" {
		d, err := os.MkdirTemp("", "linearizability-")
		if err != nil {
			return res, fmt.Errorf("linearizability picture: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("linearizability picture: %w", err)
	}
	res.Picture = filepath.Join(dir, fileName(name)+".html")
	if err := porcupine.VisualizePath(m, info, res.Picture); err != nil {
		return res, fmt.Errorf("linearizability picture of %s: %w", name, err)
	}
	return res, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName makes name safe as a file name.
func fileName(name string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(name, "_"), "_")
}
