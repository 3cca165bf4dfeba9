package idemgen_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snippetRE is the comment that stands right before a Go code block of the
// README and names the file the block is taken from:
//
//	<!-- snippet: runtime/idem/pool_test.go -->
var snippetRE = regexp.MustCompile(`^<!-- snippet: (\S+) -->$`)

// TestREADMESnippets holds every Go code block of the README and of the
// guides under docs/ to the code that compiles and runs in a test or in the
// example: the block, line by line with leading white space ignored, must
// appear in the named file (a path from the repository's root). A line "..."
// in the block stands for any lines of the file. A Go block without a
// snippet comment fails the test.
func TestREADMESnippets(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "the guides under docs/")
	blocks := 0
	for _, path := range append([]string{"README.md"}, docs...) {
		blocks += checkSnippets(t, path)
	}
	assert.Positive(t, blocks, "Go blocks in the README and the guides")
}

// checkSnippets checks the Go blocks of one markdown file and returns how
// many it has.
func checkSnippets(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	blocks := 0
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		blocks++
		start := i + 1
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		require.Less(t, end, len(lines), "%s:%d: unterminated code block", path, i+1)
		var m []string
		if i > 0 {
			m = snippetRE.FindStringSubmatch(lines[i-1])
		}
		if !assert.NotNil(t, m, "%s:%d: a Go block needs a <!-- snippet: FILE --> line before it, naming the file that holds and tests its code", path, i+1) {
			i = end
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(m[1]))
		require.NoError(t, err, "%s:%d", path, i)
		assert.True(t, contains(trimmed(strings.Split(string(src), "\n")), trimmed(lines[start:end])),
			"%s:%d: the block is not in %s as written; change one to match the other", path, i+1, m[1])
		i = end
	}
	return blocks
}

// The README is one page: what idemgen is, the two commands, the seven
// steps, one example and the map of the guides; the rest lives in docs/.
func TestREADMEIsOnePage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Count(string(b), "\n")
	assert.LessOrEqual(t, lines, 250, "README.md has %d lines; move detail into a guide under docs/", lines)
	for _, section := range []string{"## Try it", "## Use it in your module", "## Example", "## Documentation"} {
		assert.Contains(t, string(b), "\n"+section+"\n", "README section %s", section)
	}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	for _, d := range docs {
		assert.Contains(t, string(b), "("+filepath.ToSlash(d)+")", "the README's map links %s", d)
	}
}

func trimmed(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// contains reports whether block appears in file at some line.
func contains(file, block []string) bool {
	for i := range file {
		if matchAt(file[i:], block) {
			return true
		}
	}
	return false
}

// matchAt reports whether block matches the start of file; "..." matches
// any number of lines.
func matchAt(file, block []string) bool {
	if len(block) == 0 {
		return true
	}
	if block[0] == "..." {
		for k := 0; k <= len(file); k++ {
			if matchAt(file[k:], block[1:]) {
				return true
			}
		}
		return false
	}
	return len(file) > 0 && file[0] == block[0] && matchAt(file[1:], block[1:])
}

// flagsRE is the comment that stands right before the README's copy of the
// flag list -h prints, naming the file both come from.
var flagsRE = regexp.MustCompile(`^(\s*)<!-- flags: (\S+) -->$`)

// TestREADMEFlagList holds the README's flag list equal to the one
// `idemgen -h` prints (cmd/idemgen embeds the named file; its own test holds
// -h equal to the file and the file to the flags idemgen takes).
func TestREADMEFlagList(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	found := 0
	for i, l := range lines {
		m := flagsRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		found++
		indent := m[1]
		require.Less(t, i+1, len(lines))
		require.Equal(t, indent+"```text", lines[i+1], "README.md:%d: the flag list is a text block right after the comment", i+2)
		var block []string
		for j := i + 2; j < len(lines) && lines[j] != indent+"```"; j++ {
			block = append(block, strings.TrimPrefix(lines[j], indent))
		}
		want, err := os.ReadFile(filepath.FromSlash(m[2]))
		require.NoError(t, err)
		assert.Equal(t, strings.TrimRight(string(want), "\n"), strings.Join(block, "\n"),
			"README.md:%d: the flag list differs from %s, which idemgen -h prints; copy the file into the README", i+1, m[2])
	}
	assert.Equal(t, 1, found, "one <!-- flags: cmd/idemgen/flags.txt --> block in the README")
}
