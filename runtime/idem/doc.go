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
// Keys and scopes travel in the context ([ContextWithKey], [ContextWithScope])
// so the key never becomes part of the hashed request, and one tenant's key
// can never replay another tenant's response.
//
// Naming: a function whose name starts with ContextWith takes a context and
// returns one carrying a value for the next call ([ContextWithKey],
// [ContextWithScope], [ContextWithWait], [ContextWithOutcome],
// [ContextWithInlineKey]); a function whose name starts with With is an
// [Option] for [NewStore] ([WithTable], [WithRetention], ...). The same
// split as OpenTelemetry's trace.ContextWithSpan next to its options.
//
// A response is stored as bytes and every caller gets it decoded from those
// bytes, the first caller included: a replay equals the first answer
// (reflect.DeepEqual) by construction. What the encoding does not carry is
// gone for the first caller too (a time.Time comes back without its
// monotonic reading and in the offset it was written with). A response that
// cannot be stored faithfully (NaN, infinity, invalid UTF-8) is an error
// before anything commits in atomic mode.
//
// How to size the pool, what to set so that dead peers are noticed, and what
// the runtime guarantees under faults (with the fault suite's figures) are in
// docs/guarantees.md, "Guarantees and limits".
package idem
