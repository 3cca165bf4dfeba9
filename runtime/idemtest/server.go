package idemtest

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgbin"
)

// EnvDatabaseURL names the environment variable that points the tests at an
// existing server instead of a throwaway one.
const EnvDatabaseURL = "IDEMGEN_TEST_DATABASE_URL"

const (
	// tempPrefix prefixes the temporary directory of every server this package
	// starts; stale directories are found by it.
	tempPrefix = "idemtest-pg-"
	// ownerFile holds the pid of the test binary that owns a server directory.
	ownerFile = "owner.pid"
	// maxConnections is the server's max_connections: storms of 64 goroutines
	// each hold a connection, and tests in one binary may run in parallel.
	maxConnections = 300
	// startTimeout bounds initdb plus server start-up.
	startTimeout = 60 * time.Second
	// maxSocketPath keeps the socket path under the kernel's sun_path limit
	// (108 bytes on Linux, 104 on the BSDs).
	maxSocketPath = 100
)

const noServerHelp = "idemtest: no PostgreSQL to test against: " + EnvDatabaseURL + " is not set and no initdb/postgres binaries were found on PATH or under /usr/lib/postgresql/*/bin.\n" +
	"Either install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql-15; Fedora: dnf install postgresql-server; macOS: brew install postgresql@15), " +
	"or set " + EnvDatabaseURL + " to a server whose user may CREATE DATABASE, e.g. " + EnvDatabaseURL + "='postgres://postgres:secret@localhost:5432/postgres?sslmode=disable'"

// server is the PostgreSQL instance the tests of this binary create their
// databases on: either one this package started or the one named by
// EnvDatabaseURL.
type server struct {
	admin   *pgxpool.Pool // connected to the maintenance database; creates and drops test databases
	baseURL string        // connection string of the maintenance database

	// Set only for a server this package started.
	dir     string        // temporary directory: data/, sock/, postgres.log
	logPath string        // the server's log file
	proc    *os.Process   // the postmaster
	exited  chan struct{} // closed when the postmaster has exited

	// templates maps a ledger table name to a template database that
	// already holds that ledger, so a test database is one CREATE DATABASE
	// instead of CREATE DATABASE plus the DDL. Only a server this package
	// started has them: on a shared server they would outlive the tests.
	tmplMu    sync.Mutex
	templates map[string]string
}

// shared is the server of this test binary. It is process-wide state on
// purpose, the one exception to the project's no-globals rule: starting
// PostgreSQL takes seconds, so every test in the binary shares one server and
// gets its own database on it; the server must outlive any single test; and
// generated tests cannot rely on a TestMain to own it, because the user's
// package may already have its own. It is guarded by its mutex, started
// lazily by the first New, and stopped by Main or, failing that, by the
// kernel when the test binary exits.
var shared struct {
	mu      sync.Mutex
	started bool
	srv     *server
	err     error
}

// getServer returns the shared server, starting it on first use. A start-up
// failure is remembered so every later test reports it without retrying.
func getServer() (*server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared.srv, shared.err = startServer(ctx)
	}
	return shared.srv, shared.err
}

// Main is a TestMain helper: it runs the tests, stops the server this package
// started (if any) and exits with the tests' exit code.
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.srv, shared.err = nil, errors.New("idemtest: the server was stopped by idemtest.Main")
	shared.mu.Unlock()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// startServer connects to EnvDatabaseURL if set, and otherwise starts a
// throwaway server.
func startServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		admin, err := openAdmin(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("idemtest: %s: %w", EnvDatabaseURL, err)
		}
		return &server{admin: admin, baseURL: u}, nil
	}
	bin, err := findBinaries(pgbin.DebianBinaries)
	if err != nil {
		return nil, err
	}
	return startLocal(ctx, bin, nil)
}

// openAdmin opens the small pool used to create and drop test databases.
func openAdmin(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// findBinaries returns the directory holding initdb and postgres: PATH first,
// then the highest version among the directories matching pattern
// (pgbin.DebianBinaries outside tests).
func findBinaries(pattern string) (string, error) {
	dir, err := pgbin.Find(pattern)
	if errors.Is(err, pgbin.ErrNotFound) {
		return "", errors.New(noServerHelp)
	}
	return dir, err
}

// runAs is the system user initdb and postgres run as: nil for the current
// user, the postgres user when running as root (PostgreSQL refuses root).
func runAs() (*syscall.Credential, error) {
	cred, err := pgbin.ServerUser()
	if errors.Is(err, pgbin.ErrNoServerUser) {
		return nil, fmt.Errorf("idemtest: %w; run the tests as a non-root user, create a postgres user (useradd --system postgres), or set %s", err, EnvDatabaseURL)
	}
	return cred, err
}

// tempRoot is where server directories are made: the system temp directory,
// or /tmp when that would make the socket path too long or, when the server
// runs as another user (cred != nil), that user could not reach it.
func tempRoot(cred *syscall.Credential) string {
	root := os.TempDir()
	// <root>/idemtest-pg-1234567890/sock/.s.PGSQL.5432
	if len(root)+len("/"+tempPrefix+"1234567890/sock/.s.PGSQL.5432") > maxSocketPath {
		return "/tmp"
	}
	if cred != nil && !reachableByAll(root) {
		return "/tmp"
	}
	return root
}

// reachableByAll reports whether every directory on the path to dir may be
// searched by any user.
func reachableByAll(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// startLocal runs initdb into a fresh temporary directory and starts postgres
// on a unix socket there. settings are extra name=value server settings.
func startLocal(ctx context.Context, bin string, settings []string) (_ *server, err error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	root := tempRoot(cred)
	removeStale(root)

	dir, err := os.MkdirTemp(root, tempPrefix)
	if err != nil {
		return nil, fmt.Errorf("idemtest: create server directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("idemtest: write owner file: %w", err)
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("idemtest: create %s: %w", d, err)
		}
	}
	if cred != nil {
		for _, d := range []string{dir, data, sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("idemtest: hand %s to the postgres user: %w", d, err)
			}
		}
	}

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.Env = pgbin.ServerEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("idemtest: %s failed: %w\n%s", initdb.String(), err, out)
	}

	logPath := filepath.Join(dir, "postgres.log")
	srv := &server{dir: dir, logPath: logPath, exited: make(chan struct{}), templates: map[string]string{}}
	if err := srv.launch(bin, data, sock, cred, settings); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = srv.kill()
		}
	}()

	srv.baseURL = socketURL(sock, "postgres")
	if err := srv.waitReady(ctx); err != nil {
		return nil, err
	}
	admin, err := openAdmin(ctx, srv.baseURL)
	if err != nil {
		return nil, fmt.Errorf("idemtest: connect to the server: %w%s", err, srv.logTail())
	}
	srv.admin = admin
	return srv, nil
}

// launch starts the postmaster. The process is started from a goroutine locked
// to its OS thread, which stays alive (waiting for the postmaster) as long as
// the postmaster runs: Pdeathsig fires when the thread that started the child
// exits, not the process, and an unlocked thread could be retired by the Go
// runtime while the server is still in use (see go.dev/issue/27505). The
// signal still fires if the test binary dies, even by SIGKILL, so the server
// never outlives it; SIGQUIT is PostgreSQL's immediate shutdown, which also
// stops its backends.
func (s *server) launch(bin, data, sock string, cred *syscall.Credential, settings []string) error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("idemtest: create server log: %w", err)
	}
	args := []string{
		"-D", data,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + sock,
		"-c", "unix_socket_permissions=0777",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=" + strconv.Itoa(maxConnections),
		"-c", "shared_buffers=64MB",
		"-c", "max_wal_size=1GB",
		"-c", "logging_collector=off",
	}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Env = pgbin.ServerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}

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
		return fmt.Errorf("idemtest: start postgres: %w", err)
	}
	s.proc = cmd.Process
	return nil
}

// socketURL is the connection string of database db on the server listening
// in socket directory sock.
func socketURL(sock, db string) string {
	q := url.Values{"host": {sock}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "", Path: "/" + db, RawQuery: q.Encode()}).String()
}

// waitReady polls until the server accepts connections, it exits, or ctx ends.
func (s *server) waitReady(ctx context.Context) error {
	var last error
	for {
		conn, err := pgx.Connect(ctx, s.baseURL)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		last = err
		select {
		case <-s.exited:
			return fmt.Errorf("idemtest: postgres exited during start-up: %w%s", last, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("idemtest: postgres did not accept connections within %s: %w%s", startTimeout, last, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// template returns a template database holding the ledger for table, made by
// running ddl once, or "" when the server keeps no templates.
func (s *server) template(ctx context.Context, table string, ddl []string) (string, error) {
	return s.templateDB(ctx, table, func(ctx context.Context, conn *pgx.Conn) error {
		return execAll(ctx, conn, ddl)
	})
}

// templateDB returns the template database made for key, making it first by
// running setup on a connection to a new database, or "" when the server
// keeps no templates. The template refuses connections, which also keeps
// autovacuum out of it: CREATE DATABASE waits for every session connected to
// its template to leave.
func (s *server) templateDB(ctx context.Context, key string, setup func(context.Context, *pgx.Conn) error) (string, error) {
	if s.templates == nil {
		return "", nil
	}
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	if name, ok := s.templates[key]; ok {
		return name, nil
	}
	name := "idemtest_template_" + strconv.Itoa(len(s.templates))
	quoted := pgx.Identifier{name}.Sanitize()
	if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoted); err != nil {
		return "", fmt.Errorf("drop old template %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+quoted+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("create template %s: %w", name, err)
	}
	u, err := withDatabase(s.baseURL, name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", fmt.Errorf("connect to template %s: %w", name, err)
	}
	err = setup(ctx, conn)
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("close connection: %w", cerr)
	}
	if err != nil {
		return "", fmt.Errorf("set up template %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+quoted+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("mark %s as a template: %w", name, err)
	}
	s.templates[key] = name
	return name, nil
}

// logTail returns the end of the server log, formatted for an error message.
func (s *server) logTail() string {
	if s.logPath == "" {
		return ""
	}
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "\n(server log unreadable: " + err.Error() + ")"
	}
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\n--- postgres log (" + s.logPath + ") ---\n" + string(bytes.TrimSpace(b))
}

// stop closes the admin pool and, for a server this package started, stops it
// and removes its directory.
func (s *server) stop() error {
	if s.admin != nil {
		s.admin.Close()
	}
	if s.proc == nil {
		return nil
	}
	if err := s.kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("idemtest: remove server directory: %w", err)
	}
	return nil
}

// kill shuts the postmaster down immediately (SIGQUIT; the data is thrown
// away) and waits for it to exit.
func (s *server) kill() error {
	if err := s.proc.Signal(syscall.SIGQUIT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("idemtest: stop postgres: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = s.proc.Kill()
		<-s.exited
		return nil
	}
}

// removeStale removes server directories under root left behind by test
// binaries that died without stopping their server. A directory is stale when
// the test binary that made it is gone; if its postmaster somehow survived,
// it is stopped first and the directory is left for the next run.
func removeStale(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, tempPrefix+"*"))
	for _, dir := range dirs {
		owner, ok := readPid(filepath.Join(dir, ownerFile))
		if !ok {
			// No owner file yet: a server being created right now, or not ours.
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Hour {
				continue
			}
		} else if alive(owner) {
			continue
		}
		data := filepath.Join(dir, "data")
		if pm, ok := readPid(filepath.Join(data, "postmaster.pid")); ok && alive(pm) {
			if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(data)) {
				_ = syscall.Kill(pm, syscall.SIGQUIT)
			}
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// readPid reads the pid on the first line of a pid file.
func readPid(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

// alive reports whether a process with this pid is running. A zombie (dead,
// not yet reaped by its new parent) does not count.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs: trust kill(2)
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		state := stat[i+2]
		return state != 'Z' && state != 'X'
	}
	return true
}
