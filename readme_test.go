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

// TestREADMESnippets holds every Go code block of the README to the code
// that compiles and runs in a test or in the example: the block, line by
// line with leading white space ignored, must appear in the named file. A
// line "..." in the block stands for any lines of the file. A Go block
// without a snippet comment fails the test.
func TestREADMESnippets(t *testing.T) {
	b, err := os.ReadFile("README.md")
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
		require.Less(t, end, len(lines), "README.md:%d: unterminated code block", i+1)
		var m []string
		if i > 0 {
			m = snippetRE.FindStringSubmatch(lines[i-1])
		}
		if !assert.NotNil(t, m, "README.md:%d: a Go block needs a <!-- snippet: FILE --> line before it, naming the file that holds and tests its code", i+1) {
			i = end
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(m[1]))
		require.NoError(t, err, "README.md:%d", i)
		assert.True(t, contains(trimmed(strings.Split(string(src), "\n")), trimmed(lines[start:end])),
			"README.md:%d: the block is not in %s as written; change one to match the other", i+1, m[1])
		i = end
	}
	assert.Positive(t, blocks, "Go blocks in the README")
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
