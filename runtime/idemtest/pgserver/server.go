package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPrefix names the directories of servers whose Config gives no
// Prefix.
const DefaultPrefix = "pgserver-"

// killGrace is how long Kill and Stop wait for the postmaster to exit after
// the shutdown signal before they kill it outright (its backends then
// linger until they notice).
const killGrace = 10 * time.Second

// startTimeout bounds the wait for a started server to accept connections.
const startTimeout = time.Minute

// Config describes a server to start. The zero value is a server on a unix
// socket only, from the binaries FindBinaries finds, with fsync off.
type Config struct {
	// Name names the server in errors and log tails ("primary", say);
	// "postgres" if empty.
	Name string
	// Bin is the directory holding initdb and postgres (and pg_ctl,
	// pg_basebackup); empty: FindBinaries(DebianBinaries).
	Bin string
	// Prefix names the server's temporary directory (Prefix plus random
	// digits, under TempRoot); directories with this prefix that dead
	// processes left are removed first (RemoveStale). DefaultPrefix if
	// empty.
	Prefix string
	// TCP has the server listen on 127.0.0.1 at a free port as well as on
	// its unix socket. The port stays the same across restarts. As on the
	// socket, authentication is trust: any local user may connect as the
	// postgres superuser, which suits a throwaway server only.
	TCP bool
	// Settings are server settings, each "name=value" as for postgres -c,
	// given at every start after the package's own (listen addresses, the
	// socket, fsync=off, logging_collector=off), so they may override them.
	Settings []string
}

// Server is a throwaway PostgreSQL server: a temporary directory holding
// data/, sock/ (the unix socket), postgres.log and owner.pid, and, while it
// runs, its postmaster.
type Server struct {
	name     string
	bin      string
	dir      string
	data     string
	sock     string
	logPath  string
	port     int // 0: unix socket only
	cred     *syscall.Credential
	settings []string

	mu      sync.Mutex
	running *process // nil until the first start
}

// Start makes a server (Init) and starts it (Server.Start). ctx bounds the
// start-up only. The caller must Close the server.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	s, err := Init(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Init makes a server's directory and runs initdb into it, without starting
// the server. The caller must Close the server.
func Init(ctx context.Context, cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	if out, err := runLocked(s.command(ctx, "initdb", "-D", s.data, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("pgserver: %s: %w\n%s", s.name, err, out)
	}
	return s, nil
}

// newServer makes a server's directory, with an empty data/ in it, and
// picks its port.
func newServer(cfg Config) (_ *Server, err error) {
	for _, kv := range cfg.Settings {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("pgserver: server setting %q is not name=value", kv)
		}
	}
	bin := cfg.Bin
	if bin == "" {
		if bin, err = FindBinaries(DebianBinaries); err != nil {
			return nil, err
		}
	}
	cred, err := ServerUser()
	if err != nil {
		return nil, err
	}
	s := &Server{name: cfg.Name, bin: bin, cred: cred, settings: slices.Clone(cfg.Settings)}
	if s.name == "" {
		s.name = "postgres"
	}
	if cfg.TCP {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	root := TempRoot(prefix, cred)
	RemoveStale(root, prefix)
	if s.dir, err = os.MkdirTemp(root, prefix); err != nil {
		return nil, fmt.Errorf("pgserver: create server directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(s.dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(s.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgserver: write owner file: %w", err)
	}
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	s.data, s.sock, s.logPath = filepath.Join(s.dir, "data"), filepath.Join(s.dir, "sock"), filepath.Join(s.dir, "postgres.log")
	for _, d := range []string{s.data, s.sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("pgserver: %w", err)
		}
	}
	if cred != nil {
		for _, d := range []string{s.dir, s.data, s.sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgserver: hand %s to the postgres user: %w", d, err)
			}
		}
	}
	return s, nil
}

// command prepares one of the server binaries, run as the server's user in
// its directory, killed if the thread that starts it (see runLocked) goes.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = ServerEnv()
	cmd.SysProcAttr = procAttr(s.cred, syscall.SIGKILL)
	return cmd
}

// Start starts the postmaster, the first time or again after Stop or Kill,
// and waits until it accepts connections, it exits, or ctx ends.
func (s *Server) Start(ctx context.Context) error {
	p, err := s.launch()
	if err != nil {
		return err
	}
	return s.waitReady(ctx, p)
}

// launch starts the postmaster, unless it runs.
func (s *Server) launch() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != nil && !exited(s.running) {
		return nil, fmt.Errorf("pgserver: %s is already running", s.name)
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgserver: create server log: %w", err)
	}
	listen := ""
	if s.port != 0 {
		listen = "127.0.0.1"
	}
	args := []string{"-D", s.data,
		"-c", "listen_addresses=" + listen,
		"-c", "unix_socket_directories=" + s.sock,
		"-c", "unix_socket_permissions=0777",
		"-c", "fsync=off",
		"-c", "logging_collector=off",
	}
	if s.port != 0 {
		args = append(args, "-c", "port="+strconv.Itoa(s.port))
	}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Env = ServerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr(s.cred, syscall.SIGQUIT) // SIGQUIT: immediate shutdown, backends too
	p, err := startLocked(cmd, logFile)
	if err != nil {
		return nil, fmt.Errorf("pgserver: start %s: %w", s.name, err)
	}
	s.running = p
	return p, nil
}

// waitReady polls until s accepts connections, p exits, or ctx ends (or
// startTimeout passes).
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("pgserver: %s exited during start-up: %w%s", s.name, err, s.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("pgserver: %s did not accept connections: %w%s", s.name, err, s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts s down cleanly (a fast shutdown: clients are disconnected, the
// data is flushed) and waits until it has exited, or, once ctx ends or
// after ten seconds, kills it. A server not running is left alone.
func (s *Server) Stop(ctx context.Context) error {
	return s.signal(ctx, syscall.SIGINT)
}

// ShutdownImmediate stops s at once with PostgreSQL's immediate shutdown
// (SIGQUIT, what pg_ctl stop -m immediate sends: the postmaster tells every
// backend to quit, nothing is flushed, the next start runs crash recovery),
// and waits until it has exited, or, once ctx ends or after ten seconds,
// kills it. The server takes part in its own end: for a crash it has no
// say in, see Kill. A server not running is left alone.
func (s *Server) ShutdownImmediate(ctx context.Context) error {
	return s.signal(ctx, syscall.SIGQUIT)
}

// Kill crashes s: SIGKILL to the postmaster and to every process it
// started (backends, background workers, the WAL writer), at the same
// instant, as the kernel's OOM killer or a lost machine ends them, with no
// signal handler run; then it waits until they are gone (or ctx ends). The
// next Start runs crash recovery. What survives is what the server wrote
// out before: with synchronous_commit on (PostgreSQL's default, and every
// node of StartCitus's unless its Settings say otherwise) every
// acknowledged commit, since fsync being off only matters when the
// machine itself stops. Outside Linux the postmaster alone is killed and
// its children exit on their own when they notice. A server not running
// is left alone.
func (s *Server) Kill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil || exited(s.running) {
		return nil
	}
	if err := killTree(ctx, s.running); err != nil {
		return fmt.Errorf("pgserver: kill %s: %w", s.name, err)
	}
	return nil
}

// Restart stops s (Stop) and starts it again (Start).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	return s.Start(ctx)
}

// signal stops the postmaster with sig (process.stop).
func (s *Server) signal(ctx context.Context, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return nil
	}
	if err := s.running.stop(ctx, sig); err != nil {
		return fmt.Errorf("pgserver: signal %s: %w", s.name, err)
	}
	return nil
}

// Close stops s (ShutdownImmediate) and removes its directory.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	err := s.ShutdownImmediate(ctx)
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("pgserver: remove %s: %w", s.dir, rerr))
	}
	return err
}

// Name is the server's name in errors and log tails.
func (s *Server) Name() string { return s.name }

// Dir is the server's temporary directory.
func (s *Server) Dir() string { return s.dir }

// Bin is the directory the server binaries run from.
func (s *Server) Bin() string { return s.bin }

// Port is the server's TCP port on 127.0.0.1, or 0 when it listens on its
// unix socket only.
func (s *Server) Port() int { return s.port }

// Pid is the postmaster's process id, or 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil || exited(s.running) {
		return 0
	}
	return s.running.proc.Pid
}

// Addr is the server's TCP address, or "" when it listens on its unix
// socket only.
func (s *Server) Addr() string {
	if s.port == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL is the connection string of database db on s as the postgres user:
// over TCP when s listens on it, otherwise over its unix socket.
func (s *Server) URL(db string) string {
	if s.port != 0 {
		return TCPURL(s.Addr(), db)
	}
	return s.SocketURL(db)
}

// SocketURL is the connection string of database db on s over its unix
// socket.
func (s *Server) SocketURL(db string) string {
	q := url.Values{"host": {s.sock}, "sslmode": {"disable"}}
	if s.port != 0 {
		q.Set("port", strconv.Itoa(s.port))
	}
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// TCPURL is the connection string of database db as the postgres user at a
// TCP address, a server's or a proxy's in front of it.
func TCPURL(addr, db string) string {
	return "postgres://postgres@" + addr + "/" + db + "?sslmode=disable"
}

// Exec runs statements, one by one, on database postgres of s.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	return s.execIn(ctx, "postgres", stmts...)
}

// execIn runs statements, one by one, on database db of s.
func (s *Server) execIn(ctx context.Context, db string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return fmt.Errorf("pgserver: %s: %w", s.name, err)
	}
	defer conn.Close(ctx)
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgserver: %s: %s: %w", s.name, q, err)
		}
	}
	return nil
}

// queryRow runs query, one row, on database postgres of s into dest.
func (s *Server) queryRow(ctx context.Context, query string, dest ...any) error {
	return s.queryRowIn(ctx, "postgres", query, nil, dest...)
}

// queryRowIn runs query with args, one row, on database db of s into dest.
func (s *Server) queryRowIn(ctx context.Context, db, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return fmt.Errorf("pgserver: %s: %w", s.name, err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		return fmt.Errorf("pgserver: %s: %s: %w", s.name, query, err)
	}
	return nil
}

// WaitFor polls query, one boolean, on database postgres of s until it
// returns true, for at most a minute or until ctx ends; what says what is
// awaited, for the error.
func (s *Server) WaitFor(ctx context.Context, what, query string) error {
	return s.waitForIn(ctx, "postgres", what, query)
}

// waitForIn is WaitFor on database db of s.
func (s *Server) waitForIn(ctx context.Context, db, what, query string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		var ok bool
		err := s.queryRowIn(ctx, db, query, nil, &ok)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: %s did not %s (last error: %v)%s", s.name, what, last, s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// LogTail is the end of s's log, formatted for an error message: it starts
// with a newline.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "\n(server log unreadable: " + err.Error() + ")"
	}
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\n--- " + s.name + " log (" + s.logPath + ") ---\n" + string(bytes.TrimSpace(b))
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
