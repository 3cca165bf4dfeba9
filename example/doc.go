// Package example is a small payments service made idempotent with idemgen.
// It uses every feature:
//
//   - Charge and Refund are atomic: their rows and the ledger row commit in
//     one transaction. Declined cards, insufficient funds and refunding a
//     refunded payment are final errors, stored and replayed.
//   - Payout is external: it calls a bank over HTTP, so its claim is an
//     explicit in-progress state with a lock timeout; its steps are recorded
//     with idem.Step and the bank gets a stable idem.DownstreamKey.
//   - API serves them over HTTP behind the runtime/idemhttp middleware.
//
// The generated wrappers (idemgen.go), twin-request tests (idemgen_test.go)
// and migrations (migrations/) are committed; run go generate to refresh
// them and idemgen -check in CI to keep them honest.
package example
