// Package idemriver runs River jobs through idemgen's generated wrappers, so
// a job River retries, or a worker that dies after its work committed, has
// one effect.
//
// Each worker puts the job's idempotency key and scope (by default the job's
// kind) into the context, calls the wrapper, and tells River what happened.
// By default the key of a wrapper generated with -key is its request field
// (two jobs inserted for one event share it), and the job's ID, put in the
// context as a fallback (idem.ContextWithFallbackKey), keys wrappers
// without one; Config.Key sets the key from the job's arguments instead.
// The modes:
//
//   - Atomic and AtomicSQL: the function calls the wrapper's ...InTx method
//     in a transaction the worker opens; on success or replay the job is
//     completed in that same transaction (river.JobCompleteTx), so the work
//     and the job's completion commit together. A worker killed after the
//     commit leaves a completed job that never runs again.
//   - External: the function calls an external-mode wrapper; its steps
//     (idem.Step) and downstream keys (idem.DownstreamKey) survive River's
//     retries because the key, and so the ledger row, does.
//
// Whatever the mode: idem.ErrInProgress snoozes the job for the runtime's
// retry-after (river.JobSnooze, which spends no attempt); a fingerprint
// mismatch, an invalid key or scope, and a final error (a replayed one, or
// one Config.Final names) cancel it (river.JobCancel): a retry could only
// get the same answer. Any other error, the ledger's included, is returned
// as is and River retries the job on its usual schedule.
//
// The package is a module of its own, so that River is a dependency of the
// services that use it only.
package idemriver
