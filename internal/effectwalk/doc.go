// Package effectwalk finds the calls an idempotent method makes that the
// database transaction it runs in cannot undo: an HTTP request, an RPC, a
// published message, a mail, a process, a write through another database
// handle or to a file. A retry after a failed commit repeats them.
//
// The effects are named by one table, the catalogue (Catalogue): the
// functions and methods whose calls have such an effect, not the packages
// that lead to them. Check walks a method's program in SSA form
// (golang.org/x/tools/go/ssa), breadth first, from the method: through
// static calls, method calls on concrete types, interface calls resolved
// to every type of the program that implements the interface (class
// hierarchy analysis), and closures and functions taken as values, into
// the program's dependencies (a payment SDK's own use of net/http is
// found inside its module). It reports each catalogued call it reaches
// with the shortest path to it.
//
// It does not walk into the standard library (read from export data: its
// calls count only when the catalogue names them), the idem runtime, the
// SQL drivers, ORMs and query builders, loggers, tracing, metrics, UUID
// and JSON packages, or the clients of the stores it catalogues (see
// leaf); only the packages it can enter are type-checked from source
// (Load). A statement sent to a database is judged by where its handle
// comes from (provenance.go): inside the transaction when the handle is
// derived from the method's transaction parameter (tx, sqlc's
// q.WithTx(tx), bun's .Conn(tx), GORM's ConnPool = tx, …), outside, and
// reported with the handle's origin, otherwise (s.q built on the pool, a
// *bun.DB, a *gorm.DB on the pool).
//
// What it can miss: calls through function values whose origin it cannot
// see (a func stored in a field by code outside the annotated packages'
// modules; what their own code stores is followed), reflection,
// cgo and assembly, effects made by another process, and implementations
// that only a package outside the program declares. Test files are not
// part of the program, so a fake that only a test declares is never a
// candidate for an interface call.
//
// A call is allowed, not reported, by an //idem:effect-ok comment with a
// reason on its line (or alone on the line above), on the line of any call
// of its path, or in the method's doc comment.
//
// Analyzer is the same check one package at a time, for go vet-style
// runs; see its documentation for what that mode can miss.
//
// The package is shared, below both of its users: the generator's effect
// stage (gen/internal/effects) runs Load and Check, and idemvet's effects
// check is Analyzer, exported by analysis/effects. It imports neither.
package effectwalk
