// Package idem is the runtime that idemgen-generated code calls to make a
// service method idempotent on PostgreSQL.
//
// The guarantee rests on a fact the database enforces: a ledger row per
// (scope, method, key) guarded by a unique index. Around that core the
// package stores a request fingerprint (a reused key with a different
// request is a loud *MismatchError), writes the row once, with the
// response, in the work's own transaction (atomic mode: a first attempt
// does not look the key up, a row the key already has refuses the write
// and answers; twins queue on the key's lock, and only the first to write
// the row commits), or records an explicit in-progress claim with a lock
// timeout and a fencing token before the work (external mode), keeps rows
// for a retention window and sweeps them in small batches.
//
// Keys and scopes travel in the context ([ContextWithKey], [ContextWithScope])
// so the key never becomes part of the hashed request, and one tenant's key
// can never replay another tenant's response.
//
// Each mode has a runnable example, shown with its entry point and run by go
// test against a throwaway PostgreSQL: [Atomic] (a first call, a retry
// marked as one and an unmarked one, a key reused with another request),
// [External] with [Step] (a provider's answer recorded and reused by the
// retry) and [Inline] (the business row's INSERT as the claim). Generated
// code makes these calls for you; the examples show what it does. The same
// calls over HTTP, gRPC, NATS and River are the examples of runtime/idemhttp
// (New), runtime/idemgrpc, runtime/idemnats (NewHandler) and
// runtime/idemriver (Atomic); runtime/idemledger's (Main) inspects a key
// one of them recorded.
//
// Naming: a function whose name starts with ContextWith takes a context and
// returns one carrying a value for the next call ([ContextWithKey],
// [ContextWithScope], [ContextWithWait], [ContextWithOutcome], [ContextWithRetry],
// [ContextWithInlineKey]); a function whose name starts with With is an
// [Option] for [NewStore] ([WithTable], [WithRetention], ...). The same
// split as OpenTelemetry's trace.ContextWithSpan next to its options.
//
// Every error a wrapper returns is one of this package's (ErrMismatch,
// ErrInProgress, ...; wrapped or not), a *ReplayedError, or the
// application's own. [Classify] sorts them into kinds, with the delay
// before a retry and whether a retry can change the answer; runtime/idemhttp,
// runtime/idemgrpc and runtime/idemconnect each answer a kind from one table
// of their own. An AIP-155 request_id's format is a server's setting
// ([RequestIDFormat]).
//
// A response is stored as bytes and every caller gets it decoded from those
// bytes, the first caller included: a replay equals the first answer
// (reflect.DeepEqual) by construction. What the encoding does not carry is
// gone for the first caller too (a time.Time comes back without its
// monotonic reading and in the offset it was written with). A response that
// cannot be stored faithfully (NaN, infinity, invalid UTF-8) is an error
// before anything commits in atomic mode.
//
// On a primary with a synchronous standby, an answer of success means the
// standby has the row. A COMMIT that carries a claim or an outcome is not
// cancelled when the caller's context ends (cancelling it is what leaves a
// commit on the primary that the standby never got); the finalise timeout
// after that bounds it. A COMMIT cut off by that timeout, or answered with
// PostgreSQL's warning that it "might not have been replicated to the
// standby" (install [NoticeHandler] on the pool to see it), is reported as
// [ErrOutcomeNotRecorded] (and [ErrStore]: a retry settles it), never as
// success. Such a row is visible on the
// primary; a retry replays a stored outcome only after a commit of its own
// that wrote to the WAL has been confirmed by the standby (PostgreSQL
// confirms positions in the WAL, so that covers every row the retry read),
// and is an [ErrStore] error while the standby does not confirm. Chosen over
// marking rows (a second write on every call) and over reading
// pg_stat_replication (needs pg_read_all_stats, and knows nothing of quorum
// rules): the server's own wait answers exactly "does the standby have it".
// It costs an atomic or inline replay nothing where no standby is
// synchronous (the lookup asks in the same round trip; an external replay
// sends one more statement), and one synchronous commit where one is (an
// atomic replay: one more round trip). See docs/ha.md.
//
// The shape of the code. One entry point per mode, each with its form in
// the caller's transaction: [Atomic] and [AtomicInTx] (atomic.go), [Inline]
// and [InlineInTx] (inline.go), [External] (external.go). The store's
// driver is chosen when the store is made, and a body whose transaction (a
// pgx.Tx or a *sql.Tx) is not the driver's is refused (dispatch.go);
// the protocol knows a driver only through the interfaces of driver.go,
// which say how the ledger's statements travel: pipelined with BEGIN and
// COMMIT on pgx (pgxdriver.go, whose body gets an inlineTx of inlinetx.go
// that sends BEGIN with the body's first statement), one at a time on
// database/sql (sqldriver.go). A statement the protocol sends on its own,
// outside an attempt's transaction (external mode's claim, steps, outcome,
// release and heartbeat, the Citus statements, the mismatch record, the
// sweeps, the check that a replayed outcome is on the synchronous standby),
// goes through the store's executor (executor.go), chosen when the store is
// made: over the Pool (NewStore, pool.go) or over the *sql.DB (NewSQLStore,
// sqlstore.go); it and every statement helper answer with the runtime's own
// row and command tag, and only the drivers' files reach the pool or the
// *sql.DB. Atomic mode (atomic.go: atomicRun, and
// atomicInTxRun under a savepoint) looks the key up with the read
// statement when the call may be a retry (hint.go),
// runs the body between its hooks (runBody), and writes the
// key's row once with the record statement sent with COMMIT (a plain
// INSERT for a key without a row, an upsert that takes an expired row
// over: ledger.RecordForms); an attempt
// that lost (the record refused, or the body failed) rolls back and looks
// the key up again (lost). What the claims share (the claim wait, the
// read) is in claim.go; external mode's claim is claimExternal, inline
// mode's the body's own INSERT, seen by inlinetx.go on pgx (inline mode's
// runInlineBody is in inlinemethod.go); a key another request holds is
// answered in settle.go (settle from the ledger's row, inlineSettle from
// the business row: the replay, a mismatch, or in progress); the COMMIT
// that carries an outcome is sent in commit.go; an attempt that another
// can settle is retried in retry.go;
// expired keys go in sweep.go, on a schedule in janitor.go. Inline mode's
// statements ride along the body's own, so its attempt is per driver
// (inlinepgx.go, inlinesql.go). The SQL text is in package ledger
// (runtime/idem/ledger: the ledger's statements per mode and clock, with
// their Citus forms, inline mode's, the key's lock, the standby's, beside
// the DDL); the
// names this package had before the entry points took either transaction
// (AtomicSQL, ...) forward from deprecated.go.
//
// How to size the pool, what to set so that dead peers are noticed, and what
// the runtime guarantees under faults (with the fault suite's figures) are in
// docs/guarantees.md, "Guarantees and limits".
package idem
