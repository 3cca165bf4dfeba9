package pgserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRemoveStale(t *testing.T) {
	const prefix = "test-pg-"
	root := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPid := dead.Process.Pid

	mk := func(name string, owner int) string {
		dir := filepath.Join(root, prefix+name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
		if owner > 0 {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)+"\n"), 0o644))
		}
		return dir
	}
	stale := mk("stale", deadPid)
	staleWithPidFile := mk("stalepid", deadPid)
	require.NoError(t, os.WriteFile(filepath.Join(staleWithPidFile, "data", "postmaster.pid"), []byte(strconv.Itoa(deadPid)+"\n/x\n"), 0o600))
	live := mk("live", os.Getpid())
	starting := mk("starting", 0)
	abandoned := mk("abandoned", 0)
	foreign := mk("foreign", 0) // no owner file, old, a postmaster running
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "data", "postmaster.pid"), []byte(strconv.Itoa(os.Getpid())+"\n/x\n"), 0o600))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(abandoned, old, old))
	require.NoError(t, os.Chtimes(foreign, old, old))
	unrelated := filepath.Join(root, "something-else")
	require.NoError(t, os.Mkdir(unrelated, 0o700))

	RemoveStale(root, prefix)

	assert.NoDirExists(t, stale)
	assert.NoDirExists(t, staleWithPidFile)
	assert.NoDirExists(t, abandoned)
	assert.DirExists(t, live, "a directory whose process is running was removed")
	assert.DirExists(t, starting, "a directory being set up was removed")
	assert.DirExists(t, foreign, "a directory of unknown owner with a running postmaster was removed")
	assert.DirExists(t, unrelated)
}

func TestTempRootReachableByServerUser(t *testing.T) {
	// Short, so the socket path stays within limits.
	private, err := os.MkdirTemp("/tmp", "p")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(private) })
	t.Setenv("TMPDIR", private)
	assert.Equal(t, "/tmp", TempRoot(DefaultPrefix, &syscall.Credential{Uid: 101, Gid: 104}), "a directory the server user cannot reach")
	assert.Equal(t, private, TempRoot(DefaultPrefix, nil), "the current user can reach its own TMPDIR")

	t.Setenv("TMPDIR", "/"+strings.Repeat("d", 90))
	assert.Equal(t, "/tmp", TempRoot(DefaultPrefix, nil), "the socket path would be too long")
}
