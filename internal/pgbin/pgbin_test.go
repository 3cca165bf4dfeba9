package pgbin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindPicksTheHighestVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13"} {
		dir := filepath.Join(root, v, "bin")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, b := range []string{"initdb", "postgres"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	dir, err := Find(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "15", "bin"), dir)
	_, err = Find(filepath.Join(t.TempDir(), "*", "bin"))
	assert.ErrorIs(t, err, ErrNotFound)
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
