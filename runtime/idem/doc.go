// Package idem is the runtime that idemgen-generated code calls to make a
// service method idempotent on PostgreSQL.
//
// The guarantee rests on two facts the database enforces: a ledger row per
// (scope, method, key) guarded by a unique index, and a claim that inserts that
// row before anything is looked up. Around that core the package stores a
// request fingerprint (a reused key with a different request is a loud
// *MismatchError), runs the claim and the work in one transaction (atomic
// mode) or records an explicit in-progress claim with a lock timeout and a
// fencing token (external mode), keeps rows for a retention window and sweeps
// them in small batches.
//
// Keys and scopes travel in the context ([WithKey], [WithScope]) so the key
// never becomes part of the hashed request, and one tenant's key can never
// replay another tenant's response.
//
// A response is stored as bytes and every caller gets it decoded from those
// bytes, the first caller included: a replay equals the first answer
// (reflect.DeepEqual) by construction. What the encoding does not carry is
// gone for the first caller too (a time.Time comes back without its
// monotonic reading and in the offset it was written with). A response that
// cannot be stored faithfully (NaN, infinity, invalid UTF-8) is an error
// before anything commits in atomic mode.
package idem

// # Operating limits
//
// Pool sizing: an atomic call holds one pooled connection from its claim to
// its COMMIT, body included; a concurrent twin of it holds one while it waits
// on the key for the holder to commit. An external call holds a connection
// only for each ledger statement. Size the pool (pgxpool MaxConns) for the
// atomic calls you run at once plus their twins, and give every call a
// context deadline: a waiting twin gives its connection back after the claim
// wait (WithClaimWait, default 5s) or its context, whichever ends first.
//
// Dead peers: writes made after an external body ran (the outcome, a step,
// the release) and the undo of an AtomicInTx savepoint run detached from the
// caller's context, bounded by WithFinaliseTimeout. So that a client that
// vanished mid-transaction does not hold its key until TCP gives up (hours by
// default), set idle_in_transaction_session_timeout and tcp_keepalives_idle,
// tcp_keepalives_interval and tcp_keepalives_count on the server (or per role)
// and keep pgx's dialer keep-alive on: the server then ends the transaction
// and the key is free again.
