package idemtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

	"github.com/idemgen/idemgen/internal/pgbin"
)

// envOrphanChild makes the test binary act as a test binary that starts a
// server and is then killed: see TestServerDiesWithTestBinary.
const envOrphanChild = "IDEMTEST_ORPHAN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envOrphanChild) == "1" {
		orphanChild()
		return
	}
	Main(m)
}

// orphanChild starts the shared server, prints the postmaster's pid and the
// server directory, and blocks until it is killed.
func orphanChild() {
	srv, err := getServer()
	if err != nil {
		fmt.Println("error:", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	fmt.Println(srv.proc.Pid, srv.dir)
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent never closes stdin
	os.Exit(0)
}

// TestServerDiesWithTestBinary kills (SIGKILL, so no cleanup code runs) a test
// binary that started a server, and checks the server goes with it and the
// next start removes the directory it left.
func TestServerDiesWithTestBinary(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envOrphanChild+"=1", EnvDatabaseURL+"=")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "child output: %q", line)
	var pid int
	var dir string
	_, err = fmt.Sscan(line, &pid, &dir)
	require.NoError(t, err, "child output: %q", line)
	require.True(t, alive(pid), "postmaster %d is not running", pid)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	// The kernel signals the postmaster when the child dies; it then needs a
	// moment to shut down. The deadline only turns a server that never stops
	// into a failure instead of a hang.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.False(t, alive(pid), "postmaster %d outlived the test binary that started it", pid)

	require.DirExists(t, dir)
	removeStale(filepath.Dir(dir))
	assert.NoDirExists(t, dir, "the stale server directory was not removed")
}

func TestRemoveStale(t *testing.T) {
	root := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPid := dead.Process.Pid

	mk := func(name string, owner int) string {
		dir := filepath.Join(root, tempPrefix+name)
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
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(abandoned, old, old))
	unrelated := filepath.Join(root, "something-else")
	require.NoError(t, os.Mkdir(unrelated, 0o700))

	removeStale(root)

	assert.NoDirExists(t, stale)
	assert.NoDirExists(t, staleWithPidFile)
	assert.NoDirExists(t, abandoned)
	assert.DirExists(t, live, "a directory whose test binary is running was removed")
	assert.DirExists(t, starting, "a directory being set up was removed")
	assert.DirExists(t, unrelated)
}

func TestFindBinariesMissingSaysHowToGetOne(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install postgresql-15")
	assert.Contains(t, err.Error(), EnvDatabaseURL)
}

func TestFindBinariesPicksHighestVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "15", "16"} {
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
	got, err := findBinaries(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "15", "bin"), got)

	// Binaries on PATH win.
	t.Setenv("PATH", filepath.Join(root, "9.6", "bin"))
	got, err = findBinaries(filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "9.6", "bin"), got)
}

func TestStartupFailureShowsServerLog(t *testing.T) {
	bin, err := findBinaries(pgbin.DebianBinaries)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	_, err = startLocal(ctx, bin, []string{"shared_buffers=plenty"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "postgres exited during start-up")
	assert.Contains(t, err.Error(), "--- postgres log")
	assert.Contains(t, err.Error(), `invalid value for parameter "shared_buffers"`)
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:p%40ss@db.internal:5433/postgres?sslmode=require", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "postgres://u:p%40ss@db.internal:5433/idemtest_x?sslmode=require", got)

	got, err = withDatabase("postgres://postgres@/postgres?host=%2Ftmp%2Fs", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "postgres://postgres@/idemtest_x?host=%2Ftmp%2Fs", got)

	got, err = withDatabase("host=/tmp/s user=postgres dbname=postgres", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "host=/tmp/s user=postgres dbname=postgres dbname=idemtest_x", got)
}

func TestDatabaseName(t *testing.T) {
	a, err := databaseName("TestCharge/Twins:_same key (retry)#01")
	require.NoError(t, err)
	b, err := databaseName("TestCharge/Twins:_same key (retry)#01")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^idemtest_testcharge_twins_same_key_retry_01_[0-9a-f]{12}$`, a)

	long, err := databaseName(strings.Repeat("TestVeryLongName", 10))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(long), 63)
}

// TestExternalServerURL runs a few of this package's tests in a child test
// binary pointed at this binary's server through EnvDatabaseURL, given in
// keyword/value form, and checks the child makes no templates and leaves no
// database behind.
func TestExternalServerURL(t *testing.T) {
	srv, err := getServer()
	require.NoError(t, err)
	cfg := srv.admin.Config().ConnConfig
	url := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)

	countDBs := func() (tests, templates int) {
		require.NoError(t, srv.admin.QueryRow(t.Context(), `
			SELECT count(*) FILTER (WHERE datname NOT LIKE 'idemtest\_template\_%'),
			       count(*) FILTER (WHERE datname LIKE 'idemtest\_template\_%')
			FROM pg_database WHERE datname LIKE 'idemtest\_%'`).Scan(&tests, &templates))
		return tests, templates
	}
	testsBefore, templatesBefore := countDBs()

	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v",
		"-test.run=^(TestNewGivesWorkingPoolWithLedger|TestDatabaseIsDroppedAtCleanup|TestWithTableSchemaQualified)$")
	cmd.Env = append(os.Environ(), EnvDatabaseURL+"="+url)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestNewGivesWorkingPoolWithLedger")
	assert.Contains(t, string(out), "--- PASS: TestDatabaseIsDroppedAtCleanup")

	testsAfter, templatesAfter := countDBs()
	assert.Equal(t, testsBefore, testsAfter, "the child left test databases behind")
	assert.Equal(t, templatesBefore, templatesAfter, "the child made templates on an external server")

	// In-process: the URL yields a server this package did not start.
	t.Setenv(EnvDatabaseURL, url)
	ext, err := startServer(t.Context())
	require.NoError(t, err)
	assert.Nil(t, ext.proc, "a server was started although %s is set", EnvDatabaseURL)
	assert.Nil(t, ext.templates)
	require.NoError(t, ext.stop())
}

func TestExternalServerUnreachable(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "host="+t.TempDir()+" user=postgres dbname=postgres connect_timeout=5")
	_, err := startServer(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), EnvDatabaseURL)
}

func TestTempRootReachableByServerUser(t *testing.T) {
	// Short, so the socket path stays within limits.
	private, err := os.MkdirTemp("/tmp", "p")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(private) })
	t.Setenv("TMPDIR", private)
	assert.Equal(t, "/tmp", tempRoot(&syscall.Credential{Uid: 101, Gid: 104}), "a directory the server user cannot reach")
	assert.Equal(t, private, tempRoot(nil), "the current user can reach its own TMPDIR")

	t.Setenv("TMPDIR", "/"+strings.Repeat("d", 90))
	assert.Equal(t, "/tmp", tempRoot(nil), "the socket path would be too long")
}
