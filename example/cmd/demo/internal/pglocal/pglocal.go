// Package pglocal starts a throwaway PostgreSQL server for the demo: initdb
// and postgres from PATH or /usr/lib/postgresql/*/bin, in a temporary
// directory, listening on a unix socket only, with durability switched off.
// Run as root, the server runs as the postgres system user, because
// PostgreSQL refuses to run as root.
//
// runtime/idemtest does the same for tests, but only behind a testing.TB;
// this is the small stand-alone version a command can use.
package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgbin"
)

// maxSocketPath keeps the socket path under the kernel's sun_path limit.
const maxSocketPath = 100

// ErrNoBinaries is returned when neither PATH nor /usr/lib/postgresql/*/bin
// holds initdb and postgres.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or under " + pgbin.DebianBinaries +
	": install them (Debian/Ubuntu: apt-get install postgresql-15; Fedora: dnf install postgresql-server; macOS: brew install postgresql@15) " +
	"or set DATABASE_URL to a server to use")

// Server is a running throwaway PostgreSQL.
type Server struct {
	// URL connects to the server's postgres database as the postgres user.
	URL string
	// Dir is the temporary directory holding the data, the socket and the log.
	Dir string
	// Bin is the directory initdb and postgres were run from.
	Bin string

	logPath string
	proc    *os.Process
	exited  chan struct{}
}

// Start runs initdb into a new temporary directory and starts postgres on a
// unix socket there. ctx bounds the start-up only. Stop the server with Stop.
func Start(ctx context.Context) (_ *Server, err error) {
	bin, err := pgbin.Find(pgbin.DebianBinaries)
	if errors.Is(err, pgbin.ErrNotFound) {
		err = ErrNoBinaries
	}
	if err != nil {
		return nil, err
	}
	cred, err := pgbin.ServerUser()
	if err != nil {
		return nil, fmt.Errorf("%w; run the demo as a normal user, create one (useradd --system postgres), or set DATABASE_URL", err)
	}
	root := os.TempDir()
	if cred != nil || len(root)+len("/idemgen-demo-1234567890/sock/.s.PGSQL.5432") > maxSocketPath {
		root = "/tmp" // reachable by the postgres user, and short enough for the socket
	}
	dir, err := os.MkdirTemp(root, "idemgen-demo-")
	if err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if cred != nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open %s to the postgres user: %w", dir, err)
		}
		for _, d := range []string{dir, data, sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("hand %s to the postgres user: %w", d, err)
			}
		}
	}

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.Env = pgbin.ServerEnv()
	initdb.SysProcAttr = procAttr(cred, syscall.SIGKILL)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s failed: %w\n%s", initdb, err, out)
	}

	s := &Server{Dir: dir, Bin: bin, logPath: filepath.Join(dir, "postgres.log"), exited: make(chan struct{})}
	if err := s.launch(data, sock, cred); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.kill()
		}
	}()
	q := url.Values{"host": {sock}, "sslmode": {"disable"}}
	s.URL = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres", RawQuery: q.Encode()}).String()
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts the postmaster from a goroutine locked to its OS thread for
// as long as the postmaster runs: on Linux the parent-death signal fires when
// the thread that started the child exits, and an unlocked thread could be
// retired by the Go runtime while the server is in use. The signal (SIGQUIT,
// PostgreSQL's immediate shutdown) still stops the server if the demo dies,
// even by SIGKILL.
func (s *Server) launch(data, sock string, cred *syscall.Credential) error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	cmd := exec.Command(filepath.Join(s.Bin, "postgres"),
		"-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories="+sock,
		"-c", "unix_socket_permissions=0777",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "logging_collector=off",
	)
	cmd.Dir = s.Dir
	cmd.Env = pgbin.ServerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr(cred, syscall.SIGQUIT)

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see the doc comment
		defer close(s.exited)
		err := cmd.Start()
		_ = logFile.Close()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.proc = cmd.Process
	return nil
}

// waitReady polls until the server accepts connections, exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		conn, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during start-up: %w%s", err, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w%s", err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down and removes its directory.
func (s *Server) Stop() error {
	s.kill()
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", s.Dir, err)
	}
	return nil
}

// kill asks for a fast shutdown (SIGINT: disconnect clients, stop) and waits
// for it; after 10s it kills the postmaster.
func (s *Server) kill() {
	_ = s.proc.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.proc.Kill()
		<-s.exited
	}
}

// logTail returns the end of the server log, formatted for an error message.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return "\n--- postgres log ---\n" + string(bytes.TrimSpace(b))
}
