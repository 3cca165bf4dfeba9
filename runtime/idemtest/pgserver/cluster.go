package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// DefaultClusterPrefix names the directories of a cluster's servers when its
// ClusterConfig gives no Prefix.
const DefaultClusterPrefix = "pgserver-cluster-"

// ClusterConfig describes a cluster to start: today a primary and its
// streaming standbys. Fields added for other shapes (a coordinator and
// workers) leave a config that does not set them meaning what it means now.
type ClusterConfig struct {
	// Config is every server's: Bin, Prefix (DefaultClusterPrefix if
	// empty) and Settings, given after the cluster's own replication
	// settings. Name and TCP are the cluster's to set: every server listens
	// on TCP, which replication uses.
	Config
	// Standbys is how many streaming standbys the primary has.
	Standbys int
	// Via, if set, returns the address a standby reaches the primary at,
	// given the primary's (a fault proxy in front of it, say). It is called
	// once per standby.
	Via func(primary string) (string, error)
}

// Cluster is a primary and its streaming standbys, each a Server on TCP.
type Cluster struct {
	// Primary accepts writes.
	Primary *Server
	// Standbys stream from the primary, hot (they answer reads).
	Standbys []*Server
}

// StartCluster initdbs and starts the primary, takes a base backup of it for
// each standby and starts that streaming from it, and waits until every
// standby streams. The caller must Close the cluster.
func StartCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultClusterPrefix
	}
	cfg.TCP = true
	cfg.Settings = append([]string{
		"max_connections=200",
		"shared_buffers=32MB",
		"wal_level=replica",
		"max_wal_senders=" + strconv.Itoa(max(5, 2*cfg.Standbys+2)), // a base backup streaming its WAL takes two
		"hot_standby=on",
		"wal_receiver_status_interval=1s",
		"lc_messages=C",
	}, cfg.Settings...)
	c := &Cluster{}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	primary := cfg.Config
	primary.Name = "primary"
	if c.Primary, err = Start(ctx, primary); err != nil {
		return nil, err
	}
	for i := range cfg.Standbys {
		standby := cfg.Config
		standby.Name = "standby"
		if cfg.Standbys > 1 {
			standby.Name += strconv.Itoa(i + 1)
		}
		s, err := c.startStandby(ctx, standby, cfg.Via)
		if s != nil {
			c.Standbys = append(c.Standbys, s)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, c.WaitStreaming(ctx)
}

// startStandby makes a server from a base backup of the primary, reached
// through via, and starts it. It returns the server, to be closed, even
// when starting it fails.
func (c *Cluster) startStandby(ctx context.Context, cfg Config, via func(string) (string, error)) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	upstream := c.Primary.Addr()
	if via != nil {
		if upstream, err = via(upstream); err != nil {
			return s, fmt.Errorf("pgserver: %s's way to the primary: %w", s.name, err)
		}
	}
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		return s, fmt.Errorf("pgserver: %s's way to the primary: %w", s.name, err)
	}
	if err := os.Remove(s.data); err != nil { // pg_basebackup makes it
		return s, fmt.Errorf("pgserver: %w", err)
	}
	if out, err := runLocked(s.command(ctx, "pg_basebackup", "-h", host, "-p", port, "-U", "postgres",
		"-D", s.data, "-R", "-X", "stream", "--no-sync", "-c", "fast")); err != nil {
		return s, fmt.Errorf("pgserver: %s: %w\n%s", s.name, err, out)
	}
	return s, s.Start(ctx)
}

// Servers are every server of c, the primary first.
func (c *Cluster) Servers() []*Server {
	var all []*Server
	if c.Primary != nil {
		all = append(all, c.Primary)
	}
	return append(all, c.Standbys...)
}

// URL is a multi-host connection string of database db naming every server,
// that connects to whichever accepts writes, as applications configure it
// for failover.
func (c *Cluster) URL(db string) string {
	var addrs []string
	for _, s := range c.Servers() {
		addrs = append(addrs, s.Addr())
	}
	return "postgres://postgres@" + strings.Join(addrs, ",") + "/" + db +
		"?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

// WaitStreaming waits until the primary streams to every standby.
func (c *Cluster) WaitStreaming(ctx context.Context) error {
	return c.Primary.WaitFor(ctx, "stream to every standby",
		fmt.Sprintf(`SELECT count(*) >= %d FROM pg_stat_replication WHERE state = 'streaming'`, len(c.Standbys)))
}

// Synchronous makes the primary's commits wait for a standby, with
// synchronous_commit set to level ("on", "remote_write" or "remote_apply"),
// and waits until a standby is the synchronous one.
func (c *Cluster) Synchronous(ctx context.Context, level string) error {
	if err := c.Primary.Exec(ctx,
		`ALTER SYSTEM SET synchronous_standby_names = '*'`,
		fmt.Sprintf(`ALTER SYSTEM SET synchronous_commit = %q`, level),
		`SELECT pg_reload_conf()`); err != nil {
		return err
	}
	return c.Primary.WaitFor(ctx, "take a standby as synchronous",
		`SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'`)
}

// WaitReplayed waits until every standby has replayed everything the
// primary has written so far.
func (c *Cluster) WaitReplayed(ctx context.Context) error {
	var lsn string
	if err := c.Primary.queryRow(ctx, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		return err
	}
	for _, s := range c.Standbys {
		if err := s.WaitFor(ctx, "replay up to "+lsn, fmt.Sprintf(`SELECT pg_last_wal_replay_lsn() >= '%s'::pg_lsn`, lsn)); err != nil {
			return err
		}
	}
	return nil
}

// Promote makes s, a standby, a primary and waits until it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	if out, err := runLocked(s.command(ctx, "pg_ctl", "promote", "-D", s.data, "-w", "-t", "60")); err != nil {
		return fmt.Errorf("pgserver: promote %s: %w\n%s", s.name, err, out)
	}
	return s.WaitFor(ctx, "accept writes", `SELECT NOT pg_is_in_recovery()`)
}

// Close kills every server of c and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	all := c.Servers()
	for i := len(all) - 1; i >= 0; i-- { // standbys first
		errs = append(errs, all[i].Close())
	}
	return errors.Join(errs...)
}
