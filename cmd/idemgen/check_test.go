package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testmod"
)

var update = flag.Bool("update", false, "rewrite testdata/check_migrations.txtar and flags.txt from what idemgen makes")

// exampleModule copies the example package as a user writes it (its sources
// and its own migration) into a fresh module and generates it once, so every
// generated migration is today's.
func exampleModule(t *testing.T, path string) string {
	t.Helper()
	files := testmod.FreshExampleFiles(t)
	dir := testmod.New(t, "shop", files)
	r := sh(t, dir, path, nil, "idemgen", "./example")
	require.Equal(t, 0, r.code, "idemgen: %s", r.stderr)
	r = sh(t, dir, path, nil, "idemgen", "-check", "./example")
	require.Equal(t, 0, r.code, "idemgen -check after generating: %s%s", r.stdout, r.stderr)
	return dir
}

// TestCheckMigrations: -check on a hand-edited, a deleted and a deleted
// unrecorded migration says which file, what idemgen wrote there, and never
// advises accepting the edit; go generate writes a deleted migration back
// under its own name, and refuses the edit. The messages are held in
// testdata/check_migrations.txtar (go test -run TestCheckMigrations -update
// rewrites it).
func TestCheckMigrations(t *testing.T) {
	t.Parallel()
	path := toolPath(t)
	dir := exampleModule(t, path)
	mig := filepath.Join(dir, "example", "migrations")
	generated, err := os.ReadDir(mig)
	require.NoError(t, err)
	const cols = "00003_idemgen_inline_payments.sql"
	orig, err := os.ReadFile(filepath.Join(mig, cols))
	require.NoError(t, err)
	var got []txtar.File
	record := func(name string, r result) {
		got = append(got,
			txtar.File{Name: name + ".stdout", Data: []byte(r.stdout)},
			txtar.File{Name: name + ".stderr", Data: []byte(r.stderr)})
	}

	edited := strings.Replace(string(orig), "ADD COLUMN IF NOT EXISTS", "ADD COLUMN", 1)
	require.NoError(t, os.WriteFile(filepath.Join(mig, cols), []byte(edited), 0o644))
	r := sh(t, dir, path, nil, "idemgen", "-check", "./example")
	assert.Equal(t, 1, r.code)
	record("edited", r)
	r = sh(t, dir, path, nil, "idemgen", "./example")
	assert.Equal(t, 1, r.code, "go generate refuses the edit")
	record("edited-generate", r)
	assert.Equal(t, edited, readString(t, filepath.Join(mig, cols)), "the edit is left for the user to undo")

	require.NoError(t, os.Remove(filepath.Join(mig, cols)))
	r = sh(t, dir, path, nil, "idemgen", "-check", "./example")
	assert.Equal(t, 1, r.code)
	record("missing", r)
	stampGo := filepath.Join(dir, "example", "idem_gen.go")
	stamped := readString(t, stampGo)
	r = sh(t, dir, path, nil, "idemgen", "./example")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, string(orig), readString(t, filepath.Join(mig, cols)), "written back under its own name, byte for byte")
	assert.Equal(t, stamped, readString(t, stampGo))

	// A deletion no stamp records: the index migration after it would
	// precede its columns, so idemgen refuses instead of writing 00006.
	require.NoError(t, os.Remove(filepath.Join(mig, cols)))
	require.NoError(t, os.WriteFile(stampGo, []byte(strings.Replace(stamped, " migrations/"+cols+"@", " migrations/x"+cols+"@", 1)), 0o644))
	r = sh(t, dir, path, nil, "idemgen", "-check", "./example")
	assert.Equal(t, 1, r.code)
	record("unrecorded", r)
	entries, err := os.ReadDir(mig)
	require.NoError(t, err)
	assert.Len(t, entries, len(generated)-1, "nothing written")

	golden := filepath.Join("testdata", "check_migrations.txtar")
	if *update {
		require.NoError(t, os.WriteFile(golden, txtar.Format(&txtar.Archive{Files: got}), 0o644))
		return
	}
	ar, err := txtar.ParseFile(golden)
	require.NoError(t, err)
	require.Len(t, ar.Files, len(got))
	for i, f := range ar.Files {
		assert.Equal(t, f.Name, got[i].Name)
		assert.Equal(t, string(f.Data), string(got[i].Data), "%s (go test -run TestCheckMigrations -update after a deliberate change)", f.Name)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
