package idemproto_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedSuites generates the wrappers and tests of testdata/e2e
// (a method taking and returning messages in each mode: atomic, external,
// inline) in a fresh module, and runs the generated tests against a real
// PostgreSQL: twins and storms run once, a changed message is a mismatch,
// and every replay is proto.Equal to the first answer.
func TestGeneratedSuites(t *testing.T) {
	here, err := filepath.Abs(".")
	require.NoError(t, err)
	root := filepath.Dir(filepath.Dir(here))
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "e2e"))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(`module example.com/protoe2e

go 1.26.0

require (
	github.com/idemgen/idemgen v0.0.0
	github.com/idemgen/idemgen/runtime/idemproto v0.0.0
)

replace (
	github.com/idemgen/idemgen => `+root+`
	github.com/idemgen/idemgen/runtime/idemproto => `+here+`
)
`), 0o644))
	var sum bytes.Buffer
	for _, p := range []string{filepath.Join(root, "go.sum"), "go.sum"} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		sum.Write(b)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum.Bytes(), 0o644))

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	run("run", "github.com/idemgen/idemgen/cmd/idemgen", "./...")
	gen, err := fs.ReadFile(os.DirFS(dir), "shop/idem_gen.go")
	require.NoError(t, err)
	require.Contains(t, string(gen), `idemproto.Encode[*testpb.Everything]`)
	out := run("test", "-count=1", "-v", "./shop")
	for _, test := range []string{"TestIdempotentShopPlace", "TestIdempotentShopRecord", "TestIdempotentShopSend"} {
		for _, sub := range []string{"twins", "storm", "same_key,_different_request"} {
			require.Contains(t, out, "--- PASS: "+test+"/"+sub, "%s", out)
		}
	}
}
