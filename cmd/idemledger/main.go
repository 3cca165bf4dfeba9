// Command idemledger looks into idempotency keys and releases or deletes
// one: the ledger table and the business tables of inline-mode methods, in
// the database DATABASE_URL (or -db) names.
//
//	idemledger inspect [-scope S] [-method M] [-request FILE [-request FILE]] KEY
//	idemledger list    [-limit N]
//	idemledger stats
//	idemledger release -scope S [-method M] [-force] [-yes] KEY
//	idemledger delete  -scope S [-method M] [-force] [-yes] KEY
//
// It is package runtime/idemledger with no fingerprint functions, so
// inspect -request says how to build the command into a binary of the
// service's own, which can; the package documentation says why this is a
// command of its own rather than a subcommand of idemgen, and lists the
// exit statuses (0 done, 1 error, 2 misuse, 3 no such key, 4 refused,
// 5 the request does not match).
//
// Add it to a module with go get -tool github.com/idemgen/idemgen/cmd/idemledger
// and run it with go tool idemledger: go run would report every failure as
// exit status 1.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/idemgen/idemgen/runtime/idemledger"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := idemledger.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
