// Package freshkey defines an Analyzer that reports idempotency keys made
// from a fresh random or time value inside the loop that sends them.
//
// The check has three parts, a file each: where a key is set (sinks.go:
// idem.ContextWithKey, the header, the gRPC metadata, a RequestId field),
// where the key's value comes from (fresh.go: the fresh table, followed
// through locals, conversions, formatting and memory), and the loop that
// makes it and sends what carries it (loop.go). run, here, puts them
// together.
package freshkey

import (
	"fmt"
	"go/token"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

const doc = `report idempotency keys minted per attempt inside a retry loop

An idempotency key names one intention: it is made once, where the intention
is born, and every retry sends it again. A key made from a fresh random or
time value (uuid.New, uuid.NewString, ulid, ksuid, xid, crypto/rand,
math/rand, time.Now) inside a loop that also makes the call makes every
iteration a new request, which the server runs again. The check follows the
value through local variables, conversions and formatting to where it is
used as a key: idem.ContextWithKey, an Idempotency-Key header set on an
http.Header (Set, Add or a map assignment, in any case, as the Connect
client's req.Header() too), the idempotency-key gRPC metadata
(metadata.AppendToOutgoingContext, metadata.Pairs, MD.Set, MD.Append, a map
assignment) or an
AIP-155 RequestId field; and it reports the key only when the loop that
makes it also passes what carries it (the context, the request) to a call;
a function literal handed to a retry library (backoff.Retry, retry.Do) is
such a loop.
A key made once before the loop, or derived from the loop's data (an order
ID), is not reported.`

// Analyzer reports fresh keys made inside the loop that sends them.
var Analyzer = &analysis.Analyzer{
	Name:     "freshkey",
	Doc:      doc,
	URL:      "https://pkg.go.dev/github.com/idemgen/idemgen/analysis/freshkey",
	Requires: []*analysis.Analyzer{buildssa.Analyzer},
	Run:      run,
}

const (
	idemPath     = "github.com/idemgen/idemgen/runtime/idem"
	metadataPath = "google.golang.org/grpc/metadata"
	headerName   = "Idempotency-Key"
)

func run(pass *analysis.Pass) (any, error) {
	s := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	loops := newLoopIndex(pass)
	reported := map[token.Pos]bool{}
	for _, fn := range s.SrcFuncs {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				for _, sk := range sinks(instr) {
					src := freshSource(sk.key, map[ssa.Value]bool{})
					if src == nil || reported[src.Pos()] {
						continue
					}
					loop := loops.innermost(src.Pos())
					if loop == nil || !within(loop, sk.instr.Pos()) {
						continue
					}
					if !src.Block().Dominates(sk.instr.Block()) {
						continue // made on some iterations only: if key == "" { key = uuid.NewString() }
					}
					send := sends(sk.carrier, loop, map[ssa.Value]bool{})
					if send == nil {
						continue
					}
					reported[src.Pos()] = true
					pos, end := src.Pos(), token.NoPos
					if call := loops.calls[pos]; call != nil {
						pos, end = call.Pos(), call.End()
					}
					pass.Report(analysis.Diagnostic{
						Pos: pos, End: end,
						Message: fmt.Sprintf("idempotency key made from %s inside the loop that sends it (%s, sent at line %d): every iteration is a new key, so a retry is a new request that runs again; "+
							"make the key once before the loop, where the intention is born, or derive it from the data it stands for",
							calleeName(src), sk.what, pass.Fset.Position(send.Pos()).Line),
					})
				}
			}
		}
	}
	return nil, nil
}
