package gen

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

var update = flag.Bool("update", false, "rewrite the expected files and stderr of the golden cases in testdata/golden")

var hashRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// migrationNote stands in a golden for a migration file's content: which
// files are generated is checked here, what they say is gen/migrations' own
// tests' business (so a template change there does not break these cases).
const migrationNote = "(content written and tested by gen/migrations)\n"

// normalise hides what legitimately differs between machines: the stamp's
// hashes cover go.mod (with this checkout's path) and the generator binary.
// The sum of each output in the stamp is hidden too: the outputs are
// compared themselves (migrations by gen/migrations' own tests).
func normalise(b []byte) []byte {
	return sumRE.ReplaceAll(hashRE.ReplaceAll(b, []byte("sha256:HASH")), []byte("$1@SUM"))
}

// sumRE matches the sum after an output's name in the stamp.
var sumRE = regexp.MustCompile(`(\.go|\.sql|\.sum)@[0-9a-f]{16}\b`)

// TestGolden runs every case in testdata/golden: a module's sources in, the
// model (model.json, what analysis found, printed by ModelJSON) and the
// generated files (want/...), or the compiler-style errors (stderr), out. A
// change in analysis shows in model.json, apart from a change in printing.
// go test ./gen -run TestGolden -update rewrites the expectations.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(testmod.RepoRoot(t), "testdata", "golden", "*.txtar"))
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, path := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			in := map[string][]byte{}
			for _, f := range ar.Files {
				if !expected(f.Name) {
					in[f.Name] = f.Data
				}
			}
			dir := testmod.New(t, "golden", in)
			out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}, Force: true})
			got := map[string][]byte{}
			var list ErrorList
			switch {
			case errors.As(err, &list):
				got["stderr"] = []byte(list.Error() + "\n")
			case err != nil:
				t.Fatalf("Generate: %v", err)
			default:
				model, err := ModelJSON(out.Packages, dir)
				require.NoError(t, err)
				got[modelFile] = model
				for p, b := range out.Files {
					rel, err := filepath.Rel(dir, p)
					require.NoError(t, err)
					name := "want/" + filepath.ToSlash(rel)
					if strings.HasSuffix(name, ".go") {
						got[name] = normalise(b)
					} else {
						got[name] = []byte(migrationNote)
					}
				}
			}
			if *update {
				rewrite(t, path, ar, got)
				return
			}
			want := map[string][]byte{}
			for _, f := range ar.Files {
				if expected(f.Name) {
					want[f.Name] = f.Data
				}
			}
			require.Equal(t, keys(want), keys(got), "generated file set (run with -update to accept)")
			for n := range want {
				require.Equal(t, string(want[n]), string(got[n]), "%s differs (run with -update to accept)", n)
			}
			if list == nil {
				compiles(t, dir, in, out)
			}
		})
	}
}

// rewrite makes the golden case at path expect got (-update).
func rewrite(t *testing.T, path string, ar *txtar.Archive, got map[string][]byte) {
	var kept []txtar.File
	for _, f := range ar.Files {
		if !expected(f.Name) {
			kept = append(kept, f)
		}
	}
	for _, n := range keys(got) {
		require.False(t, holdsMarker(got[n]), "%s holds a txtar file marker", n)
		kept = append(kept, txtar.File{Name: n, Data: got[n]})
	}
	ar.Files = kept
	require.NoError(t, os.WriteFile(path, txtar.Format(ar), 0o644))
}

// compiles checks that a golden case's output is deterministic and
// compiles in the case's module (in are its sources).
func compiles(t *testing.T, dir string, in map[string][]byte, out *Output) {
	// Deterministic: a second run gives the same bytes.
	again, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}, Force: true})
	require.NoError(t, err)
	require.Equal(t, keys(out.Files), keys(again.Files))
	for p := range out.Files {
		require.Equal(t, string(out.Files[p]), string(again.Files[p]), "%s differs between two runs", p)
	}
	// The goldens must compile: build and vet them (vet
	// type-checks the generated tests too) in the module.
	for p, b := range out.Files {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	steps := [][]string{{"build", "./..."}, {"vet", "./..."}}
	for name := range in {
		if strings.HasSuffix(name, "fingerprint_test.go") {
			// Hand-written tests of generated code that need no database.
			steps = append(steps, []string{"test", "-count=1", "-run", "^TestFingerprint", "./..."})
			break
		}
	}
	for _, args := range steps {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		outb, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), outb)
	}
}

// modelFile is the section of a golden case holding its model.
const modelFile = "model.json"

// expected reports a section of a golden case that the generator's output
// rewrites: the model, the files (want/...) or the errors.
func expected(name string) bool {
	return name == modelFile || name == "stderr" || strings.HasPrefix(name, "want/")
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// holdsMarker reports whether data has a line that txtar would read as a file
// marker ("-- name --"), which would split the file when the archive is read.
func holdsMarker(data []byte) bool {
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			return true
		}
	}
	return false
}
