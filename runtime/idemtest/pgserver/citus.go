package pgserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultCitusPrefix names the directories of a Citus cluster's servers when
// its CitusConfig gives no Prefix.
const DefaultCitusPrefix = "pgserver-citus-"

// DefaultCitusWorkers is how many workers a Citus cluster has when its
// CitusConfig says 0.
const DefaultCitusWorkers = 2

// citusTemplate is the database on every node that holds the citus extension
// and nothing else: CreateDatabase copies it, which is faster than running
// CREATE EXTENSION citus (a long script) in every new database.
const citusTemplate = "citus_template"

// ErrNoCitus is returned, wrapped, when the servers cannot load Citus: the
// extension is not installed for their version (scripts/install-citus.sh).
var ErrNoCitus = errors.New("pgserver: the Citus extension is not installed for this PostgreSQL (run scripts/install-citus.sh as root)")

// CitusConfig describes a Citus cluster to start: a coordinator and its
// workers.
type CitusConfig struct {
	// Config is every node's: Bin, Prefix (DefaultCitusPrefix if empty) and
	// Settings, given after the cluster's own (shared_preload_libraries,
	// max_prepared_transactions...). Name and TCP are the cluster's to set:
	// every node listens on TCP, which the coordinator reaches the workers
	// by.
	Config
	// Workers is how many workers the coordinator distributes shards to;
	// DefaultCitusWorkers if 0.
	Workers int
}

// Citus is a Citus cluster: a coordinator, which applications connect to,
// and workers, which hold the shards; each a Server on TCP (127.0.0.1).
// Every node is registered with the coordinator by its address, which stays
// the same across restarts: a node killed and started again (Server.Kill,
// Server.Start) is the same node to Citus.
//
// Citus keeps its metadata per database: CreateDatabase makes a database on
// every node with the extension created and the workers registered, and
// DropDatabase drops it everywhere.
type Citus struct {
	// Coordinator holds the metadata and plans every query.
	Coordinator *Server
	// Workers hold the shards of distributed tables.
	Workers []*Server
}

// citusSettings are the settings of every node of a Citus cluster, before
// the config's own.
func citusSettings(workers int) []string {
	return []string{
		"shared_preload_libraries=citus",
		"max_connections=300",
		"shared_buffers=32MB",
		"max_wal_size=1GB",
		"full_page_writes=off",
		// synchronous_commit stays on (PostgreSQL's default): a node
		// killed (Server.Kill) keeps every commit it acknowledged. Only
		// a crash of the machine loses them (fsync is off).
		// A transaction that writes on two workers commits by two-phase
		// commit: each worker prepares it.
		"max_prepared_transactions=" + strconv.Itoa(100*max(workers, 1)),
		// Every database with the extension runs a Citus maintenance
		// daemon, a background worker: room for the tests' databases.
		"max_worker_processes=64",
		// Loopback: no TLS between the nodes.
		"citus.node_conninfo=sslmode=disable",
		// Citus ships an anonymous statistics collector: a test server
		// reports nothing (scripts/install-citus.sh also builds without it).
		"citus.enable_statistics_collection=off",
		"lc_messages=C",
	}
}

// StartCitus initdbs and starts the coordinator and the workers (at the same
// time), creates the citus extension and a template database holding it on
// every node, and registers the coordinator (citus_set_coordinator_host)
// and every worker (citus_add_node) in database postgres of the
// coordinator. The caller must Close the cluster.
func StartCitus(ctx context.Context, cfg CitusConfig) (_ *Citus, err error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultCitusPrefix
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("pgserver: a Citus cluster needs workers, not %d", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultCitusWorkers
	}
	cfg.TCP = true
	cfg.Settings = append(citusSettings(cfg.Workers), cfg.Settings...)
	c := &Citus{}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	nodes := make([]*Server, cfg.Workers+1)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		node := cfg.Config
		node.Name = "coordinator"
		if i > 0 {
			node.Name = "worker" + strconv.Itoa(i)
		}
		wg.Go(func() {
			nodes[i], errs[i] = Start(ctx, node)
			if errs[i] == nil {
				errs[i] = nodes[i].Exec(ctx, "CREATE EXTENSION citus",
					"CREATE DATABASE "+citusTemplate,
				)
			}
			if errs[i] == nil {
				errs[i] = nodes[i].execIn(ctx, citusTemplate, "CREATE EXTENSION citus")
			}
			if errs[i] == nil {
				errs[i] = nodes[i].Exec(ctx, "ALTER DATABASE "+citusTemplate+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
					// Prepared transactions a crash left behind are
					// committed or rolled back within a second, not a
					// minute. In postgresql.auto.conf, not on the command
					// line, so that Recover2PCEvery can change it.
					"ALTER SYSTEM SET citus.recover_2pc_interval = 1000",
					"SELECT pg_reload_conf()")
			}
		})
	}
	wg.Wait()
	c.Coordinator = nodes[0]
	for _, w := range nodes[1:] {
		if w != nil {
			c.Workers = append(c.Workers, w)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, citusError(err)
	}
	if err := c.register(ctx, "postgres"); err != nil {
		return nil, err
	}
	return c, nil
}

// citusError adds, to an error that says the citus library or extension is
// missing, ErrNoCitus, which says how to install it.
func citusError(err error) error {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "58P01" || // could not open extension control file
		strings.Contains(err.Error(), `could not access file "citus"`) { // shared_preload_libraries, at start-up
		return fmt.Errorf("%w: %w", ErrNoCitus, err)
	}
	return err
}

// register makes database db of the coordinator know the cluster: the
// coordinator's own address and every worker's.
func (c *Citus) register(ctx context.Context, db string) error {
	stmts := []string{fmt.Sprintf(`SELECT citus_set_coordinator_host('127.0.0.1', %d)`, c.Coordinator.Port())}
	for _, w := range c.Workers {
		stmts = append(stmts, fmt.Sprintf(`SELECT citus_add_node('127.0.0.1', %d)`, w.Port()))
	}
	return c.Coordinator.execIn(ctx, db, stmts...)
}

// Servers are every node of c, the coordinator first.
func (c *Citus) Servers() []*Server {
	var all []*Server
	if c.Coordinator != nil {
		all = append(all, c.Coordinator)
	}
	return append(all, c.Workers...)
}

// Recover2PCEvery sets how often every node's Citus maintenance daemon
// recovers the two-phase commits a crash left prepared
// (citus.recover_2pc_interval, 1s after StartCitus; 0 or less: never, so a
// test can count the transactions pg_dist_transaction records), on the
// running cluster: ALTER SYSTEM, then a configuration reload on every
// node, waiting until each reports the new value. A value set in
// CitusConfig.Settings is on the command line, which ALTER SYSTEM cannot
// override: it fails then.
func (c *Citus) Recover2PCEvery(ctx context.Context, d time.Duration) error {
	want := int64(-1)
	if d > 0 {
		want = max(d.Milliseconds(), 1)
	}
	for _, s := range c.Servers() {
		var source string
		if err := s.queryRow(ctx, `SELECT source FROM pg_settings WHERE name = 'citus.recover_2pc_interval'`, &source); err != nil {
			return err
		}
		if source == "command line" {
			return fmt.Errorf("pgserver: %s: citus.recover_2pc_interval is set in CitusConfig.Settings (the command line), which ALTER SYSTEM cannot override", s.Name())
		}
		set := fmt.Sprintf("ALTER SYSTEM SET citus.recover_2pc_interval = %d", want)
		if err := s.Exec(ctx, set, "SELECT pg_reload_conf()"); err != nil {
			return err
		}
		reloaded := fmt.Sprintf(`SELECT setting = '%d' FROM pg_settings WHERE name = 'citus.recover_2pc_interval'`, want)
		if err := s.WaitFor(ctx, "citus.recover_2pc_interval reloaded", reloaded); err != nil {
			return err
		}
	}
	return nil
}

// URL is the connection string of database db on the coordinator, where
// applications connect.
func (c *Citus) URL(db string) string { return c.Coordinator.URL(db) }

// CreateDatabase creates database db on every node, each a copy of a
// database holding the citus extension, and registers the coordinator and
// the workers in the coordinator's. Citus does not propagate CREATE
// DATABASE by default (citus.enable_create_database_propagation is off), and
// its metadata (pg_dist_node, pg_dist_partition...) is per database: a
// database made on the coordinator alone could hold no distributed table.
func (c *Citus) CreateDatabase(ctx context.Context, db string) (err error) {
	create := "CREATE DATABASE " + pgx.Identifier{db}.Sanitize() + " TEMPLATE " + citusTemplate
	defer func() {
		if err != nil {
			_ = c.DropDatabase(context.WithoutCancel(ctx), db)
		}
	}()
	// CREATE DATABASE fails with 55006 while a session is in the
	// template; on a Citus node that can be a maintenance daemon, which
	// Citus starts for any database a session used it in (the template's
	// CREATE EXTENSION did). It is tried again, as DropDatabase is.
	if err := c.onEvery(func(s *Server) error { return whileInUse(ctx, func() error { return s.Exec(ctx, create) }) }); err != nil {
		return err
	}
	return c.register(ctx, db)
}

// DropDatabase drops database db on every node that has it (WITH (FORCE):
// its sessions, the coordinator's connections to the workers among them,
// are ended), the coordinator first, then the workers at the same time,
// each as Server.DropDatabase does.
func (c *Citus) DropDatabase(ctx context.Context, db string) error {
	if err := c.Coordinator.DropDatabase(ctx, db); err != nil {
		return err
	}
	errs := make([]error, len(c.Workers))
	var wg sync.WaitGroup
	for i, w := range c.Workers {
		wg.Go(func() { errs[i] = w.DropDatabase(ctx, db) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// onEvery runs fn on every node at the same time and joins their errors.
func (c *Citus) onEvery(fn func(*Server) error) error {
	all := c.Servers()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, s := range all {
		wg.Go(func() { errs[i] = fn(s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WaitReady waits until every node accepts connections and the coordinator
// reaches every worker from database db (after a restart, say).
func (c *Citus) WaitReady(ctx context.Context, db string) error {
	q := `SELECT bool_and(result = '1') FROM run_command_on_workers('SELECT 1')`
	return c.Coordinator.waitForIn(ctx, db, "reach every worker", q)
}

// WorkerFor returns the worker that holds the shard of distributed table
// table (a name as regclass reads it) for distribution column value value,
// looked up in database db of the coordinator.
func (c *Citus) WorkerFor(ctx context.Context, db, table, value string) (*Server, error) {
	var port int
	if err := c.Coordinator.queryRowIn(ctx, db, `SELECT nodeport FROM citus_shards
WHERE shardid = get_shard_id_for_distribution_column($1::regclass, $2::text)`, []any{table, value}, &port); err != nil {
		return nil, err
	}
	for _, w := range c.Workers {
		if w.Port() == port {
			return w, nil
		}
	}
	return nil, fmt.Errorf("pgserver: the shard of %s for %q is on port %d, no worker of this cluster", table, value, port)
}

// Close kills every node of c and removes their directories.
func (c *Citus) Close() error {
	var errs []error
	for _, s := range c.Servers() {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
