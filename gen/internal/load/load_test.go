package load

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/stamp"
)

// TestGeneratedOverlay: the files idemgen wrote in the packages a pattern
// names, and only those, are handed to the go command as their bare
// package clause.
func TestGeneratedOverlay(t *testing.T) {
	root := t.TempDir()
	generated := stamp.Header + "\n\npackage %s\n\nvar _ = broken\n"
	for name, src := range map[string]string{
		"a/" + names.GoFile:          fmt.Sprintf(generated, "a"),
		"a/" + names.TestFile:        fmt.Sprintf(generated, "a"),
		"b/c/" + names.GoFile:        fmt.Sprintf(generated, "c"),
		"hand/" + names.GoFile:       "package hand\n", // not ours
		"testdata/t/" + names.GoFile: fmt.Sprintf(generated, "t"),
		".hidden/" + names.GoFile:    fmt.Sprintf(generated, "h"),
		"a/other.go":                 fmt.Sprintf(generated, "a"), // ours, but not a name idemgen writes
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	keys := func(patterns ...string) []string {
		var out []string
		for k, v := range generatedOverlay(root, patterns) {
			rel, err := filepath.Rel(root, k)
			require.NoError(t, err)
			out = append(out, filepath.ToSlash(rel)+"="+string(v))
		}
		sort.Strings(out)
		return out
	}
	all := []string{"a/idem_gen.go=package a\n", "a/idem_gen_test.go=package a\n", "b/c/idem_gen.go=package c\n"}
	assert.Equal(t, all, keys("./..."))
	assert.Equal(t, all[:2], keys("./a"))
	assert.Equal(t, all[2:], keys("./b/..."))
	assert.Equal(t, all[:2], keys("."+string(filepath.Separator)+"a"))
	assert.Empty(t, keys("example.com/m/a", "std"), "import paths are not looked into")
	assert.Empty(t, keys("./hand"))
}
