package pgserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envOrphanChild makes the test binary act as a process that starts a server
// and is then killed: see TestServerDiesWithItsProcess.
const envOrphanChild = "PGSERVER_ORPHAN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envOrphanChild) != "" {
		orphanChild(os.Getenv(envOrphanChild))
		return
	}
	os.Exit(m.Run())
}

// orphanChild starts a server with prefix, prints the postmaster's pid and
// the server directory, and blocks until it is killed.
func orphanChild(prefix string) {
	srv, err := Start(context.Background(), Config{Prefix: prefix})
	if err != nil {
		fmt.Println("error:", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	fmt.Println(srv.Pid(), srv.Dir())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent never closes stdin
	os.Exit(0)
}

// TestServerDiesWithItsProcess kills (SIGKILL, so no cleanup code runs) a
// process that started a server, and checks the server goes with it and the
// next start with the same prefix removes the directory it left.
func TestServerDiesWithItsProcess(t *testing.T) {
	prefix := fmt.Sprintf("pgserver-orphan-%d-", os.Getpid())
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envOrphanChild+"="+prefix)
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
	require.False(t, alive(pid), "postmaster %d outlived the process that started it", pid)

	require.DirExists(t, dir)
	srv, err := Start(t.Context(), Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	assert.NoDirExists(t, dir, "the stale server directory was not removed")
}

func TestStartupFailureShowsServerLog(t *testing.T) {
	_, err := Start(t.Context(), Config{Settings: []string{"shared_buffers=plenty"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "postgres exited during start-up")
	assert.Contains(t, err.Error(), "--- postgres log")
	assert.Contains(t, err.Error(), `invalid value for parameter "shared_buffers"`)
}

func TestSettingMustBeNameValue(t *testing.T) {
	_, err := Start(t.Context(), Config{Settings: []string{"fsync"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"fsync" is not name=value`)
}

// query runs a one-value query on database postgres at url.
func query[T any](t *testing.T, url, q string) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var v T
	require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&v))
	return v
}

// TestSocketOnly starts a server on its unix socket, with a setting, runs a
// query on it, closes it, and checks nothing is left behind.
func TestSocketOnly(t *testing.T) {
	s, err := Start(t.Context(), Config{Settings: []string{"max_connections=42"}})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})
	assert.Zero(t, s.Port())
	assert.Empty(t, s.Addr())
	assert.Equal(t, s.SocketURL("postgres"), s.URL("postgres"))
	assert.Equal(t, "42", query[string](t, s.URL("postgres"), "SHOW max_connections"))
	assert.Equal(t, "", query[string](t, s.URL("postgres"), "SHOW listen_addresses"))
	assert.Equal(t, "off", query[string](t, s.URL("postgres"), "SHOW fsync"))

	pid := s.Pid()
	require.NotZero(t, pid)
	require.NoError(t, s.Close())
	closed = true
	assert.False(t, alive(pid), "the postmaster is still running after Close")
	assert.Zero(t, s.Pid())
	assert.NoDirExists(t, s.Dir(), "the server directory is left behind")
}

// TestKillStopRestart crashes a server on TCP (Kill: SIGKILL to the
// postmaster and every backend, the next start runs crash recovery),
// starts it again on the same port, shuts it down immediately
// (ShutdownImmediate), stops it cleanly, restarts it, and checks a
// committed row survives each.
func TestKillStopRestart(t *testing.T) {
	s, err := Start(t.Context(), Config{TCP: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	require.NotZero(t, s.Port())
	assert.Equal(t, TCPURL(s.Addr(), "postgres"), s.URL("postgres"))
	assert.Equal(t, 1, query[int](t, s.SocketURL("postgres"), "SELECT 1"), "the unix socket works beside TCP")
	require.NoError(t, s.Exec(t.Context(), "CREATE TABLE t (v int)", "INSERT INTO t VALUES (7)"))

	ctx := t.Context()
	// A session open across the kill: its backend must die with the
	// postmaster, not linger until it notices.
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	require.NoError(t, err)
	var backend int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend))
	pid := s.Pid()
	require.NoError(t, s.Kill(ctx))
	assert.Zero(t, s.Pid())
	assert.False(t, live(pid), "the postmaster outlived Kill")
	assert.False(t, live(backend), "a backend outlived Kill")
	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err, "a session of a killed server still answers")
	_ = conn.Close(ctx)
	_, err = pgx.Connect(ctx, s.URL("postgres"))
	require.Error(t, err, "a killed server accepts connections")
	require.NoError(t, s.Kill(ctx), "killing a server not running")
	require.NoError(t, s.Start(ctx))
	assert.Equal(t, 7, query[int](t, s.URL("postgres"), "SELECT v FROM t"))
	assert.Contains(t, s.LogTail(), "database system was interrupted", "no crash recovery after Kill")
	assert.NotContains(t, s.LogTail(), "immediate shutdown request", "Kill let the postmaster run its shutdown")
	require.Error(t, s.Start(ctx), "starting a running server")

	require.NoError(t, s.ShutdownImmediate(ctx))
	assert.Zero(t, s.Pid())
	assert.Contains(t, s.LogTail(), "immediate shutdown request")
	require.NoError(t, s.ShutdownImmediate(ctx), "shutting down a server not running")
	require.NoError(t, s.Start(ctx))
	assert.Equal(t, 7, query[int](t, s.URL("postgres"), "SELECT v FROM t"))

	require.NoError(t, s.Stop(ctx))
	assert.Zero(t, s.Pid())
	assert.Contains(t, s.LogTail(), "fast shutdown request")
	require.NoError(t, s.Restart(ctx))
	require.NoError(t, s.Restart(ctx))
	assert.Equal(t, 7, query[int](t, s.URL("postgres"), "SELECT v FROM t"))
}

func TestBouncer(t *testing.T) {
	s, err := Start(t.Context(), Config{TCP: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	b, err := StartBouncer(t.Context(), s, BouncerConfig{})
	require.NoError(t, err)
	dir := b.dir
	cfg, err := pgx.ParseConfig(b.URL("postgres"))
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	require.NoError(t, err)
	var port int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_setting('port')::int").Scan(&port))
	assert.Equal(t, s.Port(), port, "PgBouncer passes queries to the server")
	require.NoError(t, conn.Close(t.Context()))
	ini, err := os.ReadFile(filepath.Join(dir, "pgbouncer.ini"))
	require.NoError(t, err)
	assert.Contains(t, string(ini), "pool_mode = transaction")
	require.NoError(t, b.Close())
	assert.True(t, exited(b.p))
	assert.NoDirExists(t, dir)
}
