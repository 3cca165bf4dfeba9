package main

import (
	"encoding/json"
	"flag"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestNames: every check is named after its package, as users type it
// (-effects=false, go vet -effects).
func TestNames(t *testing.T) {
	var got []string
	for _, a := range analyzers() {
		got = append(got, a.Name)
	}
	assert.Equal(t, []string{"bypass", "effects", "freshkey", "inlinesql"}, got)
}

// TestAlias: a former name sets the flag it stands for, alone or with a
// value.
func TestAlias(t *testing.T) {
	fs := flag.NewFlagSet("idemvet", flag.ContinueOnError)
	alias(fs, "idemeffects", "effects")
	on := fs.Bool("effects", false, "")
	require.NoError(t, fs.Parse([]string{"-idemeffects"}))
	assert.True(t, *on)
	assert.Equal(t, "true", fs.Lookup("idemeffects").Value.String())
	require.NoError(t, fs.Parse([]string{"-idemeffects=false"}))
	assert.False(t, *on)
}

// TestFormerName runs the tool as go vet does: -flags lists -idemeffects
// as a boolean, so go vet passes it on, and go vet -idemeffects reports
// what go vet -effects reports on the fresh module: nothing, as the
// module has no effect and the checks that report on it are left off.
func TestFormerName(t *testing.T) {
	tool := filepath.Join(t.TempDir(), "idemvet")
	out, err := exec.Command("go", "build", "-trimpath", "-o", tool, ".").CombinedOutput() // as TestFreshModule builds it
	require.NoError(t, err, "go build: %s", out)

	out, err = exec.Command(tool, "-flags").Output()
	require.NoError(t, err)
	var flags []struct {
		Name string
		Bool bool
	}
	require.NoError(t, json.Unmarshal(out, &flags))
	bools := map[string]bool{}
	for _, f := range flags {
		bools[f.Name] = f.Bool
	}
	assert.True(t, bools["effects"], "-effects is listed as a boolean flag")
	assert.True(t, bools["idemeffects"], "-idemeffects is listed as a boolean flag")

	ar, err := txtar.ParseFile(filepath.Join("testdata", "fresh.txtar"))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range ar.Files {
		if f.Name != "stderr" {
			files[f.Name] = f.Data
		}
	}
	dir := testmod.New(t, "fresh", files)
	byName, code := vet(t, dir, tool, "-effects")
	byFormer, formerCode := vet(t, dir, tool, "-idemeffects")
	assert.Equal(t, byName, byFormer)
	assert.Equal(t, code, formerCode)
	assert.Empty(t, byFormer, "-idemeffects runs the effects check alone")
	assert.Equal(t, 0, formerCode)
}
