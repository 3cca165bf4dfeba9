// Package idemledger is the operations command for idemgen's idempotency
// keys: it looks into the ledger table and into the business tables of
// inline-mode methods, and releases or deletes a key, against the database
// the service uses. cmd/idemledger is this package with no fingerprint
// functions; a service that wants `inspect -request` builds the same command
// into a binary of its own with Main and WithFingerprint.
//
//	idemledger inspect [-scope S] [-method M] [-request FILE [-request FILE]] KEY
//	idemledger list    [-limit N]
//	idemledger stats
//	idemledger release -scope S [-method M] [-force] [-yes] KEY
//	idemledger delete  -scope S [-method M] [-force] [-yes] KEY
//
// Every command reads the connection string from -db or DATABASE_URL, finds
// the tables by their columns (a ledger: scope, method, key, fingerprint,
// status, expires_at, locked_until, fence, steps; an inline table: the
// idempotency_key, idempotency_scope, idempotency_fingerprint and
// idempotency_claimed_at columns), or only the one -table names, prints
// tables for people and JSON with -json. Flags come before the key.
//
// # Why a command of its own, not `idemgen ledger`
//
// idemgen is a code generator: it runs in go generate and CI, never talks to
// a database, and links no database driver (package ledger imports only the
// standard library; its start-up is measured because every directive pays
// it). The operations command is the opposite: it runs where the database
// is, by people on call, and needs pgx. Keeping them apart keeps the
// generator small and fast and lets an operator install one binary without
// the other.
//
// # Running it: go tool idemledger
//
// Add it to the service's module as a tool, at the version go.mod pins:
//
//	go get -tool github.com/idemgen/idemgen/cmd/idemledger
//	go tool idemledger list
//
// (or go install github.com/idemgen/idemgen/cmd/idemledger@VERSION). Not
// go run: it reports every failure of the program it ran as its own exit
// status 1, so "no such key" (3) or "refused" (4) would read as an error. And only a binary built from the service's own code can
// fingerprint a request the way the method does (the fingerprint functions
// are generated into the user's package), which a separate, embeddable
// command allows and a subcommand of the generator would not.
//
// # Mismatches: what the ledger records, what -request can tell
//
// The ledger keeps the request's SHA-256 fingerprint, not the request, and
// records the last request refused with the key for another fingerprint
// (idem.ErrMismatch, HTTP 422): when, and that request's fingerprint
// (columns mismatch_at and mismatch_fingerprint, written by the refusal
// only). inspect shows it beside the stored fingerprint ("mismatch"), and
// says when it refused the key's previous use (a refusal older than the
// row's current request). A ledger migrated by an earlier idemgen lacks the
// columns: inspect says so, and the service answers as before (it logs that
// the refusal was not recorded) until the migration idemgen generates is
// applied.
//
// Hashes say that two requests differ, never where. With -request FILE,
// inspect decodes FILE (JSON) into the method's request type, fingerprints
// it with the method's own generated function and compares: "replay"
// (equal: a retry with this request gets the stored response) or
// "mismatch" (a retry gets idem.ErrMismatch, HTTP 422), and whether FILE is
// the request last refused. Given twice, -request FIRST -request RETRY
// (the first request and the refused one, from the client or the service's
// logs; the ledger confirms which is which) names the fields that differ:
// each field whose values differ in the two files (nested objects field by
// field) is put into FIRST alone and FIRST fingerprinted again, and a field
// is named when that changes the fingerprint. So the names are the
// method's own answer: a field the fingerprint leaves out (idem:"-") is
// never named, whatever its values. Recording per-field fingerprints
// instead would cost every claim a write and still name nothing about the
// first request, whose fields were never stored.
//
// The fingerprint functions exist only in the user's package, so
// cmd/idemledger answers -request with exit status 1 and the way to build a
// binary that can:
//
//	// in the service's package (it may call the unexported generated function)
//	func LedgerFingerprints() []idemledger.Option {
//		return []idemledger.Option{
//			idemledger.WithFingerprint("example.com/shop.Payments.Charge", idemledger.JSONRequest(fingerprintPaymentsCharge)),
//		}
//	}
//
//	// in cmd/shopledger/main.go
//	func main() { os.Exit(idemledger.Main(context.Background(), os.Args[1:], shop.LedgerFingerprints()...)) }
//
// JSONRequest fits a method with one request parameter; for several, pass a
// function that decodes FILE however suits and calls the generated one
// (fields are named for any function that takes a JSON object).
//
// # Inline tables
//
// An inline-mode key lives in its business row: inspect shows the row (as
// JSON, without the key columns) as the stored response. A claim there
// commits with the work, so no inline key is ever seen in progress and
// release does not apply; delete takes the key off its row (the row stays),
// as the sweep does. The retention window is in the code, not the row:
// -retention (default 24h, the store's default) says when an inline key
// counts as expired. -method matches a ledger's method column (the full name
// or its end, e.g. Payments.Charge); for an inline table name it with -table.
//
// # Exit status
//
//	0  done; inspect found the key (and every -request would replay)
//	1  an error: the database, a file, a fingerprint this binary does not have
//	2  misuse: unknown command or flag, a bad flag value (list -limit -5), a missing argument, a key several methods hold
//	3  no such key
//	4  refused: a live lock without -force, not confirmed, no -yes without a terminal, the row changed meanwhile
//	5  inspect -request: a request does not match the key's fingerprint
//
// A failure is one line on stderr, "idemledger: " and what went wrong; -h
// prints a command's flags and these statuses.
//
// # What list counts, and what that costs
//
// list shows each list's rows up to -limit (default 50, across every table)
// and its total: "IN PROGRESS (oldest first): 50 of 3,214, cut at -limit
// 50"; -limit 0 prints the totals only. A total comes from the statement
// that reads the rows (a window count), so it reads nothing more: the
// in-progress claims are found by a scan of the ledger whether counted or
// not (the ledger has no index on status, which would cost every claim a
// write; the count keeps the in-progress rows, normally few, for the sort),
// and the expired keys through the expires_at index, every one of them for
// the count (the sweep keeps them few). An inline table's expired keys are a
// scan of the table. Every statement is bounded by -timeout.
// The command uses one connection; every statement is bounded by -timeout
// (default 30s) and waits at most 2s for a lock, so an operator's command
// never queues the service's traffic behind it for long.
//
// release and delete act on one key of one scope: every statement filters by
// scope, method and key, and by the fence the command showed, so a row that
// changed after it was shown is refused, not overwritten. What was done is
// written to stderr.
package idemledger
