// Package faults is the fault suite: it starts its own PostgreSQL, a
// toxiproxy in front of it and a PgBouncer, throws faults at idempotent calls
// (the server stopped and restarted, the caller killed, lost COMMIT
// acknowledgements, reset connections, a blackhole partition, sweeps racing
// claims, 256-way twins and 1,000 keys x 8 twins on a 64-connection pool) and
// checks after each that no intention had a second effect, no caller was told
// "success" for an effect that did not happen, every reply for one intention
// was the same, every intention settled (succeeded, or replays an outcome
// stored as unknown), every call returned and no goroutine was left behind.
//
// TestFailover starts primaries with a pg_basebackup standby each, kills
// each primary under load and promotes its standby, with asynchronous and
// synchronous (on, remote_apply) replication, and logs a table of lost and
// repeated effects per mode (docs/ha.md). Every server of the suite, and its
// PgBouncer, is started by package runtime/idemtest/pgserver.
//
// TestNATSConsumer publishes business events to a NATS JetStream stream
// (a nats-server run in the test process), each twice under two message
// IDs, and consumes them in a separate process through runtime/idemnats
// with a short AckWait: acks are lost for a share of messages, the consumer
// is killed (SIGKILL) while a call is at the bank and started again, the
// NATS server is restarted on its kept store, and one message is poison.
// It logs a table of messages, effects, messages acked or terminated,
// messages pending at the end and repeated downstream calls
// (docs/messaging.md).
//
// Every scenario also records its history (each call's invocation and
// return, key, fingerprint and answer; the effects read at the end as each
// key's final read) and checks it for linearizability with porcupine
// against package linear's model of the promise. A history that is not
// linearizable fails the scenario, naming the HTML picture porcupine drew
// of it (-faults.pictures picks its directory). TestFailover requires its
// asynchronous standby's history not to be linearizable.
// TestSeededFaultSchedule runs a load under faults drawn from -faults.seed.
//
// BenchmarkRiverRecovery (not run by the tests) kills a River worker
// process with SIGKILL while an external job's body runs, starts it again,
// and reports how long the job took to be rescued, to run again and to
// complete, for two settings of RescueStuckJobsAfter, JobTimeout and the
// method's lock timeout (docs/messaging.md, "Recovery time after a kill"):
//
//	go test -run '^$' -bench RiverRecovery -benchtime 1x -v
//
// The restart, lost-COMMIT and twins scenarios run twice, as subtests named
// after the path: on pgx (idem.NewStore over a pool, methods taking a
// pgx.Tx) and on database/sql (idem.NewSQLStore over a *sql.DB opened with
// pgx's stdlib driver, methods taking a *sql.Tx), with the same intentions
// and checks.
//
// It is its own module so that its dependencies (the fault proxy) stay out of
// the project's go.mod. Run it with the project's test script, or here:
//
//	go test -race ./...                 # the short mode CI runs
//	go test -race -run . -faults.long   # bigger counts, and the tables of docs/guarantees.md
package faults
