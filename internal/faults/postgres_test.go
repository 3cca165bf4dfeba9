package faults

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
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgbin"
)

// postgres is the suite's own PostgreSQL server. runtime/idemtest's server
// listens on a unix socket only and cannot be stopped mid-test; the fault
// proxy needs TCP and the restart scenario needs pg_ctl, so the suite starts
// this one and hands it to idemtest through IDEMGEN_TEST_DATABASE_URL: idemtest
// still makes every test's fresh database and applies the ledger.
type postgres struct {
	bin     string              // directory of initdb, postgres, pg_ctl
	dir     string              // temporary directory: data/, sock/, postgres.log
	data    string              // the data directory
	port    int                 // TCP port on 127.0.0.1
	cred    *syscall.Credential // user the server runs as (nil: this process's)
	logPath string              // the server's log
	mu      sync.Mutex          // guards exited
	exited  chan struct{}       // closed when the running postmaster exits
}

// maxConnections leaves room for every scenario's pools plus PgBouncer's.
const maxConnections = 400

// startPostgres runs initdb into a fresh temporary directory and starts the
// server on 127.0.0.1 at a free port.
func startPostgres(ctx context.Context) (_ *postgres, err error) {
	bin, err := pgbin.Find(pgbin.DebianBinaries)
	if err != nil {
		return nil, fmt.Errorf("faults: %w: install the PostgreSQL server (Debian: apt-get install postgresql-15)", err)
	}
	cred, err := pgbin.ServerUser()
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	dir, err := os.MkdirTemp("/tmp", "faults-pg-")
	if err != nil {
		return nil, fmt.Errorf("faults: server directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	pg := &postgres{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred, logPath: filepath.Join(dir, "postgres.log")}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	for _, d := range []string{pg.data, filepath.Join(dir, "sock")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("faults: %w", err)
		}
	}
	if cred != nil {
		for _, d := range []string{dir, pg.data, filepath.Join(dir, "sock")} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("faults: hand %s to the postgres user: %w", d, err)
			}
		}
	}
	if out, err := pg.command(ctx, "initdb", "-D", pg.data, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("faults: initdb: %w\n%s", err, out)
	}
	if pg.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := pg.start(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}

// command prepares one of the server's binaries, run as the server's user.
func (pg *postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, name), args...)
	cmd.Dir = pg.dir
	cmd.Env = pgbin.ServerEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start launches the postmaster and waits until it accepts connections. The
// postmaster is started from a goroutine locked to its OS thread that waits
// for it, so Pdeathsig stops it if this process dies (as in runtime/idemtest).
func (pg *postgres) start(ctx context.Context) error {
	logFile, err := os.OpenFile(pg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("faults: server log: %w", err)
	}
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"),
		"-D", pg.data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(pg.port),
		"-c", "unix_socket_directories="+filepath.Join(pg.dir, "sock"),
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections="+strconv.Itoa(maxConnections),
		"-c", "shared_buffers=64MB",
		"-c", "logging_collector=off",
		"-c", "log_min_messages=fatal",
		// As the README advises: a transaction whose client vanished (its
		// connection cut behind the proxy) is ended by the server instead of
		// holding its key until TCP gives up.
		"-c", "idle_in_transaction_session_timeout=10s",
		"-c", "tcp_keepalives_idle=5",
		"-c", "tcp_keepalives_interval=1",
		"-c", "tcp_keepalives_count=3",
	)
	cmd.Dir = pg.dir
	cmd.Env = pgbin.ServerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGQUIT}
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
		return fmt.Errorf("faults: start postgres: %w", err)
	}
	pg.mu.Lock()
	pg.exited = exited
	pg.mu.Unlock()
	return pg.waitReady(ctx, exited)
}

// waitReady polls until the server accepts connections.
func (pg *postgres) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, pg.url("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-exited:
			return fmt.Errorf("faults: postgres exited during start-up: %w\n%s", err, pg.logTail())
		case <-ctx.Done():
			return fmt.Errorf("faults: postgres did not accept connections: %w\n%s", err, pg.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stopImmediate is `pg_ctl stop -m immediate`: every backend is killed at
// once, nothing is flushed, and the next start runs crash recovery.
func (pg *postgres) stopImmediate(ctx context.Context) error {
	out, err := pg.command(ctx, "pg_ctl", "stop", "-D", pg.data, "-m", "immediate", "-w").CombinedOutput()
	if err != nil {
		return fmt.Errorf("faults: pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	pg.mu.Lock()
	exited := pg.exited
	pg.mu.Unlock()
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("faults: postgres still running after pg_ctl stop: %w", ctx.Err())
	}
}

// close stops the server and removes its directory.
func (pg *postgres) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pg.stopImmediate(ctx)
	return errors.Join(err, os.RemoveAll(pg.dir))
}

// addr is the server's TCP address.
func (pg *postgres) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.port)) }

// url is the connection string of database db, straight to the server.
func (pg *postgres) url(db string) string { return connURL(pg.addr(), db) }

// connURL is the connection string of database db at a TCP address.
func connURL(addr, db string) string {
	return "postgres://postgres@" + addr + "/" + db + "?sslmode=disable"
}

// logTail is the end of the server log, for error messages.
func (pg *postgres) logTail() string {
	b, err := os.ReadFile(pg.logPath)
	if err != nil {
		return "(server log unreadable: " + err.Error() + ")"
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return "--- postgres log ---\n" + string(b)
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("faults: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
