// Package pgcluster starts a PostgreSQL primary and a streaming standby
// made from it with pg_basebackup, on this machine, for tests of
// replication and failover. Both run the same server binaries (found by
// internal/pgbin), on 127.0.0.1 at free ports, in a temporary directory, as
// the postgres user when the tests run as root. The standby can be stopped,
// started again and promoted; the primary can be killed.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgbin"
)

// Cluster is a primary and its streaming standby.
type Cluster struct {
	Primary *Server
	Standby *Server
	dir     string
}

// Server is one PostgreSQL server of a cluster.
type Server struct {
	Name    string // "primary" or "standby"
	Port    int    // TCP port on 127.0.0.1
	bin     string
	dir     string // the server's own directory: data/, sock/, log
	data    string
	cred    *syscall.Credential
	logPath string
	extra   []string // -c settings given at every start

	mu     sync.Mutex
	exited chan struct{} // closed when the running postmaster exits
}

// Start makes a cluster: initdb and start the primary (settings, each
// "name=value", given to it with -c), take a base backup of it as the
// standby and start that streaming from it. It waits until the standby
// streams. Close removes everything.
func Start(ctx context.Context, settings ...string) (*Cluster, error) {
	return StartVia(ctx, nil, settings...)
}

// StartVia is Start with the standby reaching the primary through the
// address via returns for the primary's (a fault proxy, say); nil is
// straight.
func StartVia(ctx context.Context, via func(primary string) (string, error), settings ...string) (_ *Cluster, err error) {
	bin, err := pgbin.Find(pgbin.DebianBinaries)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w: install the PostgreSQL server (Debian: apt-get install postgresql-15)", err)
	}
	// initdb on PATH may be a link to the server's directory, which also
	// holds pg_basebackup: use that directory.
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		bin = filepath.Dir(real)
	}
	cred, err := pgbin.ServerUser()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	dir, err := os.MkdirTemp("/tmp", "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dir: dir}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if c.Primary, err = newServer(dir, "primary", bin, cred, settings); err != nil {
		return nil, err
	}
	if c.Standby, err = newServer(dir, "standby", bin, cred, nil); err != nil {
		return nil, err
	}
	p := c.Primary
	if out, err := p.command(ctx, "initdb", "-D", p.data, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	s := c.Standby
	if err := os.Remove(s.data); err != nil { // pg_basebackup makes it
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	upstream := p.Addr()
	if via != nil {
		if upstream, err = via(upstream); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	}
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if out, err := s.command(ctx, "pg_basebackup", "-h", host, "-p", port, "-U", "postgres",
		"-D", s.data, "-R", "-X", "stream", "--no-sync", "-c", "fast").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: pg_basebackup: %w\n%s", err, out)
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return c, c.WaitStreaming(ctx)
}

func newServer(dir, name, bin string, cred *syscall.Credential, extra []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Name: name, Port: port, bin: bin, dir: filepath.Join(dir, name), cred: cred, extra: extra}
	s.data = filepath.Join(s.dir, "data")
	s.logPath = filepath.Join(s.dir, "postgres.log")
	for _, d := range []string{s.dir, s.data, filepath.Join(s.dir, "sock")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgcluster: hand %s to the postgres user: %w", d, err)
			}
		}
	}
	return s, nil
}

// URL is the connection string of database db on s.
func (s *Server) URL(db string) string {
	return "postgres://postgres@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// Addr is s's TCP address.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL is a multi-host connection string of database db naming both
// servers, that connects to whichever accepts writes, as applications
// configure it for failover.
func (c *Cluster) URL(db string) string {
	return "postgres://postgres@" + c.Primary.Addr() + "," + c.Standby.Addr() + "/" + db +
		"?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// command prepares one of the server binaries, run as the server's user.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = pgbin.ServerEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start launches s's postmaster and waits until it accepts connections. It
// is started from a goroutine locked to its OS thread that waits for it, so
// Pdeathsig stops it if this process dies (as in runtime/idemtest).
func (s *Server) Start(ctx context.Context) error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: server log: %w", err)
	}
	args := []string{"-D", s.data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(s.Port),
		"-c", "unix_socket_directories=" + filepath.Join(s.dir, "sock"),
		"-c", "fsync=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "wal_level=replica",
		"-c", "max_wal_senders=5",
		"-c", "hot_standby=on",
		"-c", "wal_receiver_status_interval=1s",
		"-c", "logging_collector=off",
		"-c", "lc_messages=C",
	}
	for _, e := range s.extra {
		args = append(args, "-c", e)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Env = pgbin.ServerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Pdeathsig follows the thread
		defer close(exited)
		err := cmd.Start()
		_ = logFile.Close()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgcluster: start %s: %w", s.Name, err)
	}
	s.mu.Lock()
	s.exited = exited
	s.mu.Unlock()
	return s.waitReady(ctx, exited)
}

// waitReady polls until s accepts connections.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-exited:
			return fmt.Errorf("pgcluster: %s exited during start-up: %w\n%s", s.Name, err, s.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: %s did not accept connections: %w\n%s", s.Name, err, s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill stops s at once, the way a crash does: `pg_ctl stop -m immediate`
// (every backend killed, nothing flushed), and waits for it to exit. A
// server not running is left alone.
func (s *Server) Kill(ctx context.Context) error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if out, err := s.command(ctx, "pg_ctl", "stop", "-D", s.data, "-m", "immediate", "-w").CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: stop %s: %w\n%s", s.Name, err, out)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgcluster: %s still running after pg_ctl stop: %w", s.Name, ctx.Err())
	}
}

// Promote makes s (a standby) a primary and waits until it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	if out, err := s.command(ctx, "pg_ctl", "promote", "-D", s.data, "-w", "-t", "60").CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: promote %s: %w\n%s", s.Name, err, out)
	}
	return s.waitFor(ctx, "accept writes", `SELECT NOT pg_is_in_recovery()`)
}

// Exec runs statements on database postgres of s.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: %s: %w", s.Name, err)
	}
	defer conn.Close(ctx)
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgcluster: %s: %s: %w", s.Name, q, err)
		}
	}
	return nil
}

// waitFor polls query, one boolean, on s until it returns true.
func (s *Server) waitFor(ctx context.Context, what, query string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, query).Scan(&ok)
			_ = conn.Close(ctx)
			if err == nil && ok {
				return nil
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: %s did not %s (last error: %v)\n%s", s.Name, what, last, s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitStreaming waits until the primary streams to the standby.
func (c *Cluster) WaitStreaming(ctx context.Context) error {
	return c.Primary.waitFor(ctx, "stream to the standby", `SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming'`)
}

// Synchronous makes the primary's commits wait for the standby, with
// synchronous_commit set to level ("on", "remote_write" or
// "remote_apply"), and waits until the standby is the synchronous one.
func (c *Cluster) Synchronous(ctx context.Context, level string) error {
	if err := c.Primary.Exec(ctx,
		`ALTER SYSTEM SET synchronous_standby_names = '*'`,
		fmt.Sprintf(`ALTER SYSTEM SET synchronous_commit = %q`, level),
		`SELECT pg_reload_conf()`); err != nil {
		return err
	}
	return c.Primary.waitFor(ctx, "take the standby as synchronous",
		`SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'`)
}

// WaitReplayed waits until the standby has replayed everything the primary
// has written so far.
func (c *Cluster) WaitReplayed(ctx context.Context) error {
	var lsn string
	if err := pgxQueryRow(ctx, c.Primary, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		return err
	}
	return c.Standby.waitFor(ctx, "replay up to "+lsn, fmt.Sprintf(`SELECT pg_last_wal_replay_lsn() >= '%s'::pg_lsn`, lsn))
}

func pgxQueryRow(ctx context.Context, s *Server, query string, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: %s: %w", s.Name, err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query).Scan(dest...); err != nil {
		return fmt.Errorf("pgcluster: %s: %s: %w", s.Name, query, err)
	}
	return nil
}

// LogTail is the end of s's log, for error messages.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return "--- " + s.Name + " log ---\n" + strings.TrimSpace(string(b))
}

// Close kills both servers and removes the cluster's directory.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, s := range []*Server{c.Standby, c.Primary} {
		if s != nil {
			errs = append(errs, s.Kill(ctx))
		}
	}
	return errors.Join(append(errs, os.RemoveAll(c.dir))...)
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
