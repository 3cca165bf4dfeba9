package faults

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// holdLock is the advisory lock an armed COMMIT waits for at the server.
const holdLock = 4242

// commitHoldDDL makes the server hold one armed COMMIT of the atomic method:
// a deferred constraint trigger on the ledger fires when the transaction
// that stored a response (atomic mode: inserted the key's row with it)
// commits, inside the COMMIT, before it is durable.
// If commit_arm has a row, the trigger takes it (SKIP LOCKED: one COMMIT
// per arm), notes the arm and the key in commit_held (visible only if this
// COMMIT completes) and waits for holdLock, which the test holds. The hold is on
// the server, so it is the same for a COMMIT pipelined with the response
// (pgx) and for one sent on its own (database/sql).
func commitHoldDDL(method string) []string {
	return commitHoldDDLOn(idem.DefaultTable, method)
}

// commitHoldDDLOn is commitHoldDDL with the trigger on table (a Citus shard
// of the ledger, say).
func commitHoldDDLOn(table, method string) []string {
	return []string{
		`CREATE TABLE commit_arm (id int PRIMARY KEY)`,
		`CREATE TABLE commit_held (arm int NOT NULL, scope text NOT NULL, method text NOT NULL, key text NOT NULL)`,
		fmt.Sprintf(`CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	armed int;
BEGIN
	DELETE FROM commit_arm WHERE id = (SELECT id FROM commit_arm LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id INTO armed;
	IF armed IS NOT NULL THEN
		INSERT INTO commit_held VALUES (armed, NEW.scope, NEW.method, NEW.key);
		PERFORM pg_advisory_xact_lock_shared(%d);
	END IF;
	RETURN NULL;
END $$`, holdLock),
		fmt.Sprintf(`CREATE CONSTRAINT TRIGGER hold_commit AFTER UPDATE ON %s
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (NEW.method = '%s' AND NEW.response IS NOT NULL AND OLD.response IS NULL)
EXECUTE FUNCTION hold_commit()`, table, method),
		// Atomic mode writes the key's row once, with its response.
		fmt.Sprintf(`CREATE CONSTRAINT TRIGGER hold_commit_insert AFTER INSERT ON %s
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (NEW.method = '%s' AND NEW.response IS NOT NULL)
EXECUTE FUNCTION hold_commit()`, table, method),
	}
}

// holdWaiter is the server process of the COMMIT waiting for holdLock, or 0.
const holdWaiter = `SELECT coalesce(min(pid), 0) FROM pg_locks
WHERE locktype = 'advisory' AND classid = 0 AND objid = $1 AND objsubid = 1 AND NOT granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// holdsLock reports whether server process pid holds or waits for holdLock.
const holdsLock = `SELECT count(*) > 0 FROM pg_locks
WHERE pid = $1 AND locktype = 'advisory' AND classid = 0 AND objid = $2 AND objsubid = 1`

// TestCommitAcknowledgementLost loses the answer to COMMIT, again and again,
// under a load, on the pgx and the database/sql path. Each round arms the
// server (commitHoldDDL) to hold the next COMMIT of an atomic call that
// stored its response; once it is held, every byte from the server to the
// clients is dropped (a toxiproxy timeout toxic on the downstream stream),
// the COMMIT is let go and completes at the server, and then every
// connection is cut. The caller cannot know whether its transaction
// committed; the ledger row must settle it. External calls caught by the
// same cuts settle too: a finalise whose answer was lost leaves the key
// locked until its lock expires (then a takeover replays the recorded step),
// and a step whose result could not be recorded settles as an outcome stored
// as unknown (ErrOutcomeNotRecorded, replayed): check counts both as settled
// and still asserts at most one effect each.
func TestCommitAcknowledgementLost(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) {
		rounds := size(5, 10)
		e := newEnv(t, "COMMIT acknowledgement lost"+p.label(), envConfig{path: p, setup: commitHoldDDL(chargeName)})
		ctl, err := e.db.Pool.Acquire(context.Background()) // straight to the server: holds holdLock
		require.NoError(t, err)
		defer ctl.Release()
		ins := withInline(intents("commit", size(40, 1500), size(10, 300)), "commit", size(10, 300))
		wait := e.storm(ins, 4)
		lost, tries := 0, 0
		for lost < rounds && tries < 4*rounds {
			tries++
			if e.loseCommitAck(ctl, tries) {
				lost++
			}
		}
		wait()
		require.Equal(t, rounds, lost, "COMMIT answers lost after the COMMIT ran, in %d tries", tries)
		e.check(ins)
	})
}

// loseCommitAck runs round arm of TestCommitAcknowledgementLost on ctl, a
// connection straight to the server, and reports whether the held COMMIT
// completed (a call that gives up while its COMMIT is held rolls back, and
// its arm goes back to commit_arm: the round then loses an answer to
// nothing and does not count).
func (e *env) loseCommitAck(ctl *pgxpool.Conn, arm int) bool {
	t := e.t
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := ctl.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`SELECT pg_advisory_lock($1)`, holdLock)
	exec(`INSERT INTO commit_arm VALUES ($1)`, arm)
	var pid uint32
	e.waitFor("an armed COMMIT to be held", func() bool {
		select {
		case <-e.allReturned():
			t.Fatalf("%s: the load ended before a COMMIT was held", e.name)
		default:
		}
		require.NoError(t, ctl.QueryRow(ctx, holdWaiter, holdLock).Scan(&pid))
		return pid != 0
	})
	e.addToxic("lose-ack", "timeout", "downstream", `{"timeout":0}`)
	exec(`SELECT pg_advisory_unlock($1)`, holdLock)
	e.waitFor("the held COMMIT to end", func() bool {
		var still bool
		require.NoError(t, ctl.QueryRow(ctx, holdsLock, pid, holdLock).Scan(&still))
		return !still
	})
	var committed bool
	require.NoError(t, ctl.QueryRow(ctx, `SELECT count(*) > 0 FROM commit_held WHERE arm = $1`, arm).Scan(&committed))
	exec(`DELETE FROM commit_arm WHERE id = $1`, arm) // back if the held COMMIT rolled back
	e.proxy.Stop()                                    // every connection cut: the COMMIT's answer is gone
	e.removeToxic("lose-ack")
	require.NoError(t, e.proxy.Start())
	return committed
}
