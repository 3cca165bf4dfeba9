package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBouncer is returned, wrapped, when there is no pgbouncer binary on
// PATH or in /usr/sbin.
var ErrNoBouncer = errors.New("pgserver: pgbouncer not found on PATH or in /usr/sbin")

// bouncerPrefix names PgBouncer's temporary directories.
const bouncerPrefix = "pgbouncer-"

// BouncerConfig describes a PgBouncer to start.
type BouncerConfig struct {
	// Bin is the pgbouncer binary; empty: the one on PATH, or
	// /usr/sbin/pgbouncer.
	Bin string
	// PoolMode is PgBouncer's pool_mode; "transaction" if empty.
	PoolMode string
	// PoolSize is its default_pool_size, the server connections per
	// database and user; 20 if 0.
	PoolSize int
}

// Bouncer is a PgBouncer on 127.0.0.1 in front of a Server, every database
// of it, with trust authentication, run as the server's user (it refuses
// root).
type Bouncer struct {
	dir  string
	port int
	p    *process
}

// StartBouncer starts a PgBouncer in front of upstream and waits until it
// passes a query through. The caller must Close it.
func StartBouncer(ctx context.Context, upstream *Server, cfg BouncerConfig) (_ *Bouncer, err error) {
	bin := cfg.Bin
	if bin == "" {
		if bin, err = exec.LookPath("pgbouncer"); err != nil {
			bin = "/usr/sbin/pgbouncer"
			if !isExecutable(bin) {
				return nil, ErrNoBouncer
			}
		}
	}
	if cfg.PoolMode == "" {
		cfg.PoolMode = "transaction"
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 20
	}
	root := TempRoot(bouncerPrefix, upstream.cred)
	RemoveStale(root, bouncerPrefix)
	dir, err := os.MkdirTemp(root, bouncerPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgserver: pgbouncer directory: %w", err)
	}
	b := &Bouncer{dir: dir}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if b.port, err = freePort(); err != nil {
		return nil, err
	}
	server := "host=" + upstream.sock + " port=5432"
	if upstream.port != 0 {
		server = "host=127.0.0.1 port=" + strconv.Itoa(upstream.port)
	}
	ini := fmt.Sprintf(`[databases]
* = %s user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 1000
default_pool_size = %d
logfile = %s
pidfile = %s
ignore_startup_parameters = extra_float_digits
`, server, b.port, filepath.Join(dir, "userlist.txt"), cfg.PoolMode, cfg.PoolSize, b.logPath(), filepath.Join(dir, "pgbouncer.pid"))
	files := map[string]string{
		ownerFile:       strconv.Itoa(os.Getpid()) + "\n",
		"pgbouncer.ini": ini,
		"userlist.txt":  `"postgres" ""` + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("pgserver: %w", err)
		}
	}
	if cred := upstream.cred; cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgserver: hand %s to the postgres user: %w", dir, err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Dir = dir
	cmd.Env = ServerEnv()
	cmd.SysProcAttr = procAttr(upstream.cred, syscall.SIGKILL)
	if b.p, err = startLocked(cmd); err != nil {
		return nil, fmt.Errorf("pgserver: start pgbouncer: %w", err)
	}
	return b, b.waitReady(ctx)
}

// waitReady polls until a query passes through b, b exits, or ctx ends (or
// startTimeout passes).
func (b *Bouncer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(b.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(ctx)
		}
		if err == nil {
			return nil
		}
		select {
		case <-b.p.exited:
			log, _ := os.ReadFile(b.logPath())
			return fmt.Errorf("pgserver: pgbouncer exited during start-up: %w\n%s", err, log)
		case <-ctx.Done():
			return fmt.Errorf("pgserver: pgbouncer did not accept connections: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *Bouncer) logPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

// Addr is PgBouncer's TCP address.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// URL is the connection string of database db through PgBouncer.
func (b *Bouncer) URL(db string) string { return TCPURL(b.Addr(), db) }

// Close stops PgBouncer (SIGINT: at once), or after ten seconds kills it,
// and removes its directory.
func (b *Bouncer) Close() error {
	var err error
	if b.p != nil {
		err = b.p.stop(context.Background(), syscall.SIGINT)
	}
	if rerr := os.RemoveAll(b.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("pgserver: remove %s: %w", b.dir, rerr))
	}
	return err
}
