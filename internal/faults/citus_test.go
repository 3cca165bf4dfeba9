package faults

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// citusPaymentsDDL is paymentsDDL on a Citus cluster: the payments table
// distributed by scope and co-located with the ledger (which idemtest
// distributes by scope before these statements run), so a call's claim, its
// insert and its response are on one shard of one worker. Citus refuses a
// primary key without the distribution column, hence (scope, id).
var citusPaymentsDDL = []string{
	`CREATE TABLE payments (
	id     bigserial,
	scope  text   NOT NULL,
	key    text   NOT NULL,
	memo   text   NOT NULL,
	amount bigint NOT NULL,
	PRIMARY KEY (scope, id)
)`,
	`SELECT create_distributed_table('payments', 'scope', colocate_with => '` + idem.DefaultTable + `')`,
}

// citusServer is the suite's Citus cluster, a coordinator and two workers,
// started by the first Citus scenario and stopped by TestMain.
func citusServer(t *testing.T) *idemtest.Server {
	t.Helper()
	suite.citusOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		suite.citus, suite.citusErr = idemtest.StartCitus(ctx, pgserver.CitusConfig{
			Config: pgserver.Config{Prefix: "faults-citus-", Settings: []string{
				"max_connections=" + strconv.Itoa(maxConnections),
				// A node killed mid-run keeps every commit it acknowledged
				// (idemtest.StartCitus's default, stated here because the
				// suite depends on it): a call on one tenant commits on
				// the worker alone, without the two-phase commit's
				// PREPARE, whose WAL is flushed whatever the setting.
				"synchronous_commit=on",
				"log_min_messages=fatal",
				"idle_in_transaction_session_timeout=10s",
				"tcp_keepalives_idle=5",
				"tcp_keepalives_interval=1",
				"tcp_keepalives_count=3",
			}},
			Workers: 2,
		})
	})
	require.NoError(t, suite.citusErr)
	return suite.citus
}

// newCitusEnv is newEnv on the suite's Citus cluster: a database on every
// node, the ledger and the payments table distributed by scope, the fault
// proxy in front of the coordinator. The scenarios call the atomic and the
// external method, every ledger statement of which routes to the key's
// shard (TestCitus in runtime/idem); inline mode has its own Citus tests
// there.
func newCitusEnv(t *testing.T, name string, cfg envConfig) *env {
	t.Helper()
	srv := citusServer(t)
	cfg.citus = srv
	cfg.upstream = srv.Cluster().Coordinator.Addr()
	return newEnv(t, name+" (Citus)", cfg)
}

// TestCitusTwins releases 256 identical calls per key at once, then 8
// identical calls for each of 100 keys (1,000 in the long mode), on the
// database/sql path, through the coordinator of a Citus cluster.
func TestCitusTwins(t *testing.T) {
	t.Run("256", func(t *testing.T) {
		e := newCitusEnv(t, "256-way twins", envConfig{poolSize: 64})
		ins := intents("twins", size(2, 27), size(1, 13))
		e.storm(ins, 256)()
		e.check(ins)
	})
	t.Run("storm", func(t *testing.T) {
		n := size(100, 1000)
		e := newCitusEnv(t, fmt.Sprintf("%d keys x 8 twins", n), envConfig{poolSize: 64, path: sqlPath})
		ins := intents("thousand", n, n/4)
		e.storm(ins, 8)()
		e.check(ins)
	})
}

// TestCitusRestart kills a node with an immediate shutdown in the middle of
// a load of calls with repeated keys, waits until every
// call in flight has returned, and starts it again: the worker holding the
// tenant's shard (the claim, the insert and the response live there), then
// the coordinator (the calls' connections and Citus's metadata); on the pgx
// and the database/sql path.
func TestCitusRestart(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) {
		for _, node := range []string{"worker", "coordinator"} {
			t.Run(node, func(t *testing.T) {
				n := size(30, 700)
				e := newCitusEnv(t, "Citus "+node+" stopped (immediate) and restarted"+p.label(), envConfig{path: p})
				c := citusServer(t).Cluster()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				victim := c.Coordinator
				if node == "worker" {
					w, err := c.WorkerFor(ctx, e.db.Name, idem.DefaultTable, scope)
					require.NoError(t, err)
					victim = w
				}
				ins := intents("restart-"+node, 2*n, n)
				begin := time.Now()
				wait := e.storm(ins, 4)
				e.waitClaims(int64(len(ins) / 3))
				require.NoError(t, victim.Kill(ctx))
				e.drainInflight()
				require.NoError(t, victim.Start(ctx))
				require.NoError(t, c.WaitReady(ctx, e.db.Name))
				wait()
				t.Logf("%s (%s) killed and started again; done at %s", victim.Name(), victim.Addr(), time.Since(begin))
				e.check(ins)
			})
		}
	})
}

// TestCitusCommitAcknowledgementLost is TestCommitAcknowledgementLost on a
// Citus cluster: the armed COMMIT is held on the worker holding the tenant's
// shard (the trigger is on the shard, its tables on that worker), inside the
// COMMIT the coordinator sends it, and the answer the coordinator then sends
// the caller is lost; on the pgx and the database/sql path.
func TestCitusCommitAcknowledgementLost(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) { citusLoseCommitAcks(t, p) })
}

// citusLoseCommitAcks is TestCitusCommitAcknowledgementLost on path p. A
// round whose held COMMIT rolled back (its caller gave up first) loses an
// answer to nothing and does not count: it is tried up to eight times as
// many rounds as it needs, twice TestCommitAcknowledgementLost's bound, for
// a loaded machine runs three servers here.
func citusLoseCommitAcks(t *testing.T, p txPath) {
	rounds := size(5, 10)
	e := newCitusEnv(t, "COMMIT acknowledgement lost"+p.label(), envConfig{path: p})
	ctx := context.Background()
	c := citusServer(t).Cluster()
	w, err := c.WorkerFor(ctx, e.db.Name, idem.DefaultTable, scope)
	require.NoError(t, err)
	wpool, err := pgxpool.New(ctx, w.URL(e.db.Name))
	require.NoError(t, err)
	defer wpool.Close()
	var shard string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT shard_name(logicalrelid, shardid) FROM pg_dist_shard
WHERE shardid = get_shard_id_for_distribution_column($1::regclass, $2::text)`, idem.DefaultTable, scope).Scan(&shard))
	ctl, err := wpool.Acquire(ctx) // straight to the worker: holds holdLock
	require.NoError(t, err)
	defer func() {
		if ctl != nil {
			ctl.Release()
		}
	}()
	// The shard is a table of the worker's, and the hold's tables and
	// function are the worker's alone: Citus lets a session change a shard,
	// and make objects it does not propagate, when asked to.
	for _, q := range []string{`SET citus.enable_manual_changes_to_shards = on`, `SET citus.enable_ddl_propagation = off`} {
		_, err = ctl.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	for _, q := range commitHoldDDLOn(shard, chargeName) {
		_, err := ctl.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	ins := intents("commit", size(40, 1700), size(10, 400))
	wait := e.storm(ins, 4)
	lost, tries := 0, 0
	for lost < rounds && tries < 8*rounds {
		tries++
		if e.loseCommitAck(ctl, tries) {
			lost++
		}
	}
	wait()
	require.Equal(t, rounds, lost, "COMMIT answers lost after the COMMIT ran, in %d tries", tries)
	ctl.Release()
	ctl = nil
	wpool.Close() // before check, which finds every goroutine left behind
	e.check(ins)
}
