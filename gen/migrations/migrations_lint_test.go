package migrations

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// squawkFinding is one entry of squawk's JSON report.
type squawkFinding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Rule    string `json:"rule_name"`
	Message string `json:"message"`
}

// writeDir writes a scenario directory to a temporary directory.
func writeDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for n, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
	}
	return dir
}

// toolBinary finds a binary that scripts/install-tools.sh installs.
func toolBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", ".tools", "bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed at %s: run scripts/install-tools.sh first (%v)", name, p, err)
	}
	return p
}

// squawk runs squawk with its default rules on files and returns its
// findings.
func squawk(t *testing.T, files ...string) []squawkFinding {
	t.Helper()
	bin := toolBinary(t, "squawk")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--reporter", "json"}, files...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var findings []squawkFinding
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &findings), "squawk output: %s\n%s", stdout.String(), stderr.String())
	if len(findings) == 0 {
		require.NoError(t, err, "squawk failed without findings: %s", stderr.String())
	}
	return findings
}

// TestSquawkFindsNothing lints every generated file of every format and
// scenario with squawk's default rules: zero findings. Rules that do not
// apply are exempted in the files themselves, next to the statement, with
// the reason.
func TestSquawkFindsNothing(t *testing.T) {
	var files []string
	for _, format := range Formats() {
		for name, dir := range scenarios(t, format) {
			written := writeDir(t, owned(dir))
			for n := range owned(dir) {
				if strings.HasSuffix(n, ".sql") {
					files = append(files, filepath.Join(written, n))
				}
			}
			_ = name
		}
	}
	require.Greater(t, len(files), 40)
	findings := squawk(t, files...)
	for _, f := range findings {
		t.Errorf("%s:%d: %s: %s", filepath.Base(f.File), f.Line, f.Rule, f.Message)
	}
	out, err := exec.Command(toolBinary(t, "squawk"), "--version").Output()
	require.NoError(t, err)
	t.Logf("%s: %d files, %d findings", strings.TrimSpace(string(out)), len(files), len(findings))
}

// TestSquawkSeesTheExemptedRules proves the lint is not vacuous: with the
// ignore comments taken out, squawk reports exactly the rules the files
// exempt.
func TestSquawkSeesTheExemptedRules(t *testing.T) {
	dir := owned(scenarios(t, "goose")["evolved"])
	stripped := map[string][]byte{}
	for n, b := range dir {
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "-- squawk-ignore") {
				out = append(out, line)
			}
		}
		stripped[n] = []byte(strings.Join(out, "\n"))
	}
	written := writeDir(t, stripped)
	var files []string
	for n := range stripped {
		files = append(files, filepath.Join(written, n))
	}
	rules := map[string]bool{}
	for _, f := range squawk(t, files...) {
		rules[f.Rule] = true
	}
	for _, r := range []string{"prefer-robust-stmts", "require-concurrent-index-creation", "ban-drop-table", "ban-drop-column"} {
		assert.True(t, rules[r], "squawk reports %s once its ignore comment is gone (got %v)", r, rules)
	}
}

// TestAtlasSum recomputes atlas.sum independently, following atlas's
// sql/migrate HashFile: a running SHA-256 over each file's name and bytes in
// lexical order gives each file's hash; the first line hashes every name and
// hash. The directory includes the user's own files.
func TestAtlasSum(t *testing.T) {
	for name, dir := range scenarios(t, "atlas") {
		t.Run(name, func(t *testing.T) {
			sum, ok := dir[AtlasSumFile]
			require.True(t, ok)
			assert.Equal(t, recomputeAtlasSum(t, dir), string(sum))

			lines := strings.Split(strings.TrimSuffix(string(sum), "\n"), "\n")
			sqlFiles := 0
			for n := range dir {
				if strings.HasSuffix(n, ".sql") {
					sqlFiles++
				}
			}
			assert.Len(t, lines, sqlFiles+1, "one line per .sql file, the user's included, after the total")
		})
	}

	// A file whose first line says atlas:sum ignore feeds only its name.
	dir := map[string][]byte{"1_a.sql": []byte("SELECT 1;\n"), "2_b.sql": []byte("-- atlas:sum ignore\nSELECT 2;\n")}
	assert.Equal(t, recomputeAtlasSum(t, dir), string(AtlasSum(dir)))
	assert.NotContains(t, string(AtlasSum(dir)), "2_b.sql")
}

func recomputeAtlasSum(t *testing.T, dir map[string][]byte) string {
	t.Helper()
	var names []string
	for n := range dir {
		if filepath.Ext(n) == ".sql" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	var listed []string
	var body strings.Builder
	for _, n := range names {
		h.Write([]byte(n))
		first, _, _ := strings.Cut(string(dir[n]), "\n")
		if i := strings.Index(first, "atlas:sum"); i >= 0 && strings.TrimSpace(first[i+len("atlas:sum"):]) == "ignore" {
			continue
		}
		h.Write(dir[n])
		fileHash := base64.StdEncoding.EncodeToString(h.Sum(nil))
		listed = append(listed, n+fileHash)
		body.WriteString(n + " h1:" + fileHash + "\n")
	}
	total := sha256.New()
	for _, l := range listed {
		total.Write([]byte(l))
	}
	out := "h1:" + base64.StdEncoding.EncodeToString(total.Sum(nil)) + "\n" + body.String()

	// The result parses the way atlas reads it back: the first line is the
	// total, every other line "name h1:hash".
	sc := bufio.NewScanner(strings.NewReader(out))
	require.True(t, sc.Scan())
	require.True(t, strings.HasPrefix(sc.Text(), "h1:"))
	for sc.Scan() {
		require.Len(t, strings.SplitN(sc.Text(), "h1:", 2), 2)
	}
	return out
}
