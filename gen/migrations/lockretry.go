package migrations

import (
	"fmt"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// LockAttemptWait is the longest one attempt of a migration waits for the
// ACCESS EXCLUSIVE lock an ALTER TABLE needs. While a lock request waits,
// every writer of the table queues behind it, so this is the longest a
// writer stalls per attempt.
const LockAttemptWait = 100 * time.Millisecond

// Backoff between lock attempts: the first pause, and the longest.
const (
	lockFirstPause = 50 * time.Millisecond
	lockMaxPause   = time.Second
)

// lockBudget is how long a migration goes on trying to take its lock: half
// its statement_timeout, which bounds the DO block that loops, so the loop
// gives up with its own message before the timeout cancels it.
func lockBudget(statement time.Duration) time.Duration { return statement / 2 }

// lockStmt takes table's ACCESS EXCLUSIVE lock for the statements that
// follow it in the same transaction, in short attempts with backoff.
//
// A lock request that waits makes every later writer of the table queue
// behind it: one long lock_timeout (waiting behind a report's open
// transaction) stalls all inserts for that long. So each attempt waits at
// most LockAttemptWait; a refused attempt (lock_not_available) is rolled
// back to its savepoint, which withdraws the request so the writers go on,
// sleeps with jittered exponential backoff and tries again, until the
// budget is spent. Once the lock is held, the ALTER statements after it run
// without waiting. Each refused attempt raises a NOTICE, so a migration
// tool's log shows what the migration waited for.
func (r *renderer) lockStmt(table ledger.Ident) stmt {
	wait := min(LockAttemptWait, r.cfg.LockTimeout)
	budget := lockBudget(r.cfg.StatementTimeout)
	q := table.Quoted()
	sql := fmt.Sprintf(`DO $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval %[2]s;
    pause float8 := %[3]g;
    attempt int := 1;
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', %[4]s, true);
            LOCK TABLE %[1]s IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF clock_timestamp() + pause * interval '1 second' > deadline THEN
                RAISE EXCEPTION 'idemgen: no lock on %% after %% attempts in %%; run the migration again when the long transactions on the table have ended', %[5]s, attempt, interval %[2]s
                    USING ERRCODE = 'lock_not_available';
            END IF;
            RAISE NOTICE 'idemgen: lock on %% not available (attempt %%); retrying in %% s', %[5]s, attempt, round(pause::numeric, 3);
            PERFORM pg_sleep(pause * (0.5 + random() / 2));
            pause := least(pause * 2, %[6]g);
            attempt := attempt + 1;
        END;
    END LOOP;
    RAISE NOTICE 'idemgen: lock on %% taken (attempt %%)', %[5]s, attempt;
    PERFORM set_config('lock_timeout', %[7]s, true);
END
$$;`, q, pgDuration(budget), lockFirstPause.Seconds(), pgDuration(wait), quoteLiteral(table.String()),
		lockMaxPause.Seconds(), pgDuration(r.cfg.LockTimeout))
	return stmt{
		Why: []string{fmt.Sprintf("Take the table's ACCESS EXCLUSIVE lock first, in attempts of at most %s: while a lock request waits, every writer of the table queues behind it, so a long wait (behind a report's open transaction) would stall them all. A refused attempt steps back, letting the writers go on, sleeps with backoff and tries again, for up to %s in all. The statements below then run under the lock without waiting.",
			wait, budget)},
		SQL: r.format.Block(sql),
	}
}
