package gen

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/gen/internal/names"
)

// TestFileNames: the facade's output file names are the naming table's.
func TestFileNames(t *testing.T) {
	assert.Equal(t, names.GoFile, GoFile)
	assert.Equal(t, names.TestFile, TestFile)
}

func TestUnifiedDiff(t *testing.T) {
	assert.Empty(t, UnifiedDiff("a", "b", []byte("x\n"), []byte("x\n")))
	a := []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n")
	b := []byte("1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n")
	// Changes closer than twice the context share a hunk, as in diff -u.
	assert.Equal(t, "--- a\n+++ b\n@@ -2,9 +2,10 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n+11\n", UnifiedDiff("a", "b", a, b))
	c := []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n")
	d := []byte("one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n")
	assert.Equal(t, "--- a\n+++ b\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -11,4 +11,3 @@\n 11\n 12\n 13\n-14\n", UnifiedDiff("a", "b", c, d))
}
