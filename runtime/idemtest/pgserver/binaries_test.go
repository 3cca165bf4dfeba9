package pgserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindBinariesPicksHighestVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "13", "15", "16"} {
		bin := filepath.Join(root, v, "bin")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		names := []string{"initdb", "postgres"}
		if v == "16" {
			names = names[:1] // incomplete install: no server binary
		}
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	got, err := FindBinaries(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "15", "bin"), got)

	// Binaries on PATH win.
	t.Setenv("PATH", filepath.Join(root, "9.6", "bin"))
	got, err = FindBinaries(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "9.6", "bin"), got)

	// A directory on PATH linking to the binaries gives theirs.
	links := t.TempDir()
	for _, n := range []string{"initdb", "postgres"} {
		require.NoError(t, os.Symlink(filepath.Join(root, "13", "bin", n), filepath.Join(links, n)))
	}
	t.Setenv("PATH", links)
	got, err = FindBinaries(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "13", "bin"), got)
}

func TestFindBinariesMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := FindBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	assert.ErrorIs(t, err, ErrNoBinaries)
}

func TestVersion(t *testing.T) {
	assert.Equal(t, []int{15}, Version("/usr/lib/postgresql/15/bin"))
	assert.Equal(t, []int{9, 6}, Version("/usr/lib/postgresql/9.6/bin"))
	assert.Nil(t, Version("/usr/local/bin"))
}

func TestServerEnvDropsClientVariables(t *testing.T) {
	t.Setenv("PGHOST", "elsewhere")
	env := ServerEnv()
	assert.NotContains(t, env, "PGHOST=elsewhere")
	assert.Contains(t, env, "LC_ALL=C")
}
