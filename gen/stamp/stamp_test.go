package stamp

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen"
)

// writeTree writes files (slash paths relative to root) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
}

// stamped writes a module whose package svc has been "generated": a
// wrappers file stamped by Apply and one more output.
func stamped(t *testing.T) (root, pkg string) {
	t.Helper()
	root = t.TempDir()
	writeTree(t, root, map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.26\n",
		"svc/svc.go":       "package svc\n\nimport (\n\t\"context\"\n\n\t\"example.com/m/types\"\n)\n\nfunc Do(ctx context.Context, r types.Req) error { return nil }\n",
		"types/types.go":   "package types\n\n// Req is a request.\ntype Req struct{ ID string }\n",
		"other/other.go":   "package other\n",
		"svc/old/extra.go": "package old\n",
	})
	pkg = filepath.Join(root, "svc")
	inputs, err := Inputs(pkg)
	require.NoError(t, err)
	outputs := map[string][]byte{"migrations/00001_x.sql": []byte("CREATE TABLE x ();\n")}
	unstamped := []byte(Header + "\n\npackage svc\n\nfunc generated() {}\n")
	src := Apply(unstamped, inputs, outputs)
	writeTree(t, pkg, map[string]string{GoFile: string(src), "migrations/00001_x.sql": string(outputs["migrations/00001_x.sql"])})
	return root, pkg
}

func TestApply(t *testing.T) {
	unstamped := []byte(Header + "\n\npackage svc\n")
	src := string(Apply(unstamped, "sha256:in", map[string][]byte{"b.sql": []byte("b"), "a.sql": []byte("a")}))
	want := Header + "\n// idemgen-inputs: sha256:in\n// idemgen-outputs: " +
		Outputs(unstamped, map[string][]byte{"a.sql": []byte("a"), "b.sql": []byte("b")}) +
		" a.sql@" + FileSum([]byte("a")) + " b.sql@" + FileSum([]byte("b")) + "\n\npackage svc\n"
	assert.Equal(t, want, src)
	assert.Equal(t, map[string]string{"a.sql": FileSum([]byte("a")), "b.sql": FileSum([]byte("b"))}, Written([]byte(src)))
	assert.True(t, IsGenerated([]byte(src)))
	assert.False(t, IsGenerated([]byte("package svc\n")))
}

// TestMatches: current after Apply; every change to an input or an output,
// and every damaged stamp, means generate again.
func TestMatches(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, root, pkg string)
	}{
		{"a source file", func(t *testing.T, root, pkg string) { appendTo(t, filepath.Join(pkg, "svc.go"), "// edit\n") }},
		{"a new source file", func(t *testing.T, root, pkg string) { writeTree(t, pkg, map[string]string{"more.go": "package svc\n"}) }},
		{"a removed source file", func(t *testing.T, root, pkg string) { require.NoError(t, os.Remove(filepath.Join(pkg, "svc.go"))) }},
		{"go.mod", func(t *testing.T, root, pkg string) {
			appendTo(t, filepath.Join(root, "go.mod"), "require example.com/x v1.0.0\n")
		}},
		{"an imported package of the module", func(t *testing.T, root, pkg string) {
			appendTo(t, filepath.Join(root, "types", "types.go"), "// Resp is new.\ntype Resp struct{}\n")
		}},
		{"the wrappers file's code", func(t *testing.T, root, pkg string) { appendTo(t, filepath.Join(pkg, GoFile), "// hand edit\n") }},
		{"the inputs stamp", func(t *testing.T, root, pkg string) {
			replaceIn(t, filepath.Join(pkg, GoFile), "idemgen-inputs: sha256:", "idemgen-inputs: sha256:0")
		}},
		{"the outputs stamp", func(t *testing.T, root, pkg string) {
			replaceIn(t, filepath.Join(pkg, GoFile), " migrations/00001_x.sql", "")
		}},
		{"an output", func(t *testing.T, root, pkg string) {
			appendTo(t, filepath.Join(pkg, "migrations", "00001_x.sql"), "-- edit\n")
		}},
		{"a deleted output", func(t *testing.T, root, pkg string) {
			require.NoError(t, os.Remove(filepath.Join(pkg, "migrations", "00001_x.sql")))
		}},
		{"a deleted wrappers file", func(t *testing.T, root, pkg string) { require.NoError(t, os.Remove(filepath.Join(pkg, GoFile))) }},
		{"a wrappers file not written by idemgen", func(t *testing.T, root, pkg string) {
			replaceIn(t, filepath.Join(pkg, GoFile), Header, "// Written by hand.")
		}},
		{"a stamp pushed out of the header", func(t *testing.T, root, pkg string) {
			replaceIn(t, filepath.Join(pkg, GoFile), Header+"\n", Header+"\n//"+strings.Repeat(" long", headerMax/5)+"\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, pkg := stamped(t)
			ok, err := Matches(pkg)
			require.NoError(t, err)
			require.True(t, ok, "fresh output must match")
			c.change(t, root, pkg)
			ok, err = Matches(pkg)
			require.NoError(t, err)
			assert.False(t, ok, "changing %s must regenerate", c.name)
		})
	}

	t.Run("files outside the inputs", func(t *testing.T) {
		root, pkg := stamped(t)
		appendTo(t, filepath.Join(root, "other", "other.go"), "// not imported\n")
		writeTree(t, pkg, map[string]string{"notes.txt": "not Go", "testdata/x.go": "package x\n"})
		ok, err := Matches(pkg)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

// TestGeneratorID: stable within a build, and part of the inputs.
func TestGeneratorID(t *testing.T) {
	id := GeneratorID()
	assert.Len(t, id, 64)
	assert.Equal(t, id, GeneratorID())
	_, pkg := stamped(t)
	in, err := Inputs(pkg)
	require.NoError(t, err)
	assert.NotEqual(t, "sha256:"+id, in)
}

func TestWithoutInputs(t *testing.T) {
	a := []byte(Header + "\n// idemgen-inputs: sha256:aaaa\n// idemgen-outputs: sha256:cccc x.go\n\npackage p\n")
	b := []byte(Header + "\n// idemgen-inputs: sha256:bbbb\n// idemgen-outputs: sha256:cccc x.go\n\npackage p\n")
	c := []byte(Header + "\n// idemgen-inputs: sha256:bbbb\n// idemgen-outputs: sha256:dddd x.go\n\npackage p\n")
	assert.Equal(t, WithoutInputs(a), WithoutInputs(b), "only the inputs stamp differs")
	assert.NotEqual(t, WithoutInputs(a), WithoutInputs(c), "the outputs stamp is content")
	body := []byte(Header + "\n\npackage p\n\n// idemgen-inputs: sha256:x is not a stamp below the package clause\n")
	assert.Equal(t, body, WithoutInputs(body))
	hand := []byte("// idemgen-inputs: sha256:x\npackage p\n")
	assert.Equal(t, map[string]string{"x.go": ""}, Written(a), "a stamp without sums lists bare names")
	assert.Nil(t, Written(hand))
	assert.Equal(t, hand, WithoutInputs(hand), "a file idemgen did not write is left alone")
}

func appendTo(t *testing.T, path, extra string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, extra...), 0o644))
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

// TestGeneratorSourcesCoverGen: every non-test Go file under gen/ is part of
// the generator's identity, so a change to any of them regenerates stamped
// packages. A new package under gen/ must be added to the embed patterns in
// the module's sources.go.
func TestGeneratorSourcesCoverGen(t *testing.T) {
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel("..", path)
		require.NoError(t, err)
		name := "gen/" + filepath.ToSlash(rel)
		_, err = fs.Stat(idemgen.GeneratorSources, name)
		assert.NoError(t, err, "%s is not embedded in idemgen.GeneratorSources: add its directory to the patterns in sources.go", name)
		n++
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, n, 10)
}
