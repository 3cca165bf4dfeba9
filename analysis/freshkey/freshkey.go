// Package freshkey defines an Analyzer that reports idempotency keys made
// from a fresh random or time value inside the loop that sends them.
package freshkey

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strings"

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

// fresh lists the functions whose result is new on every call, by package
// path; an empty list means every function of the package.
var fresh = map[string][]string{
	"github.com/google/uuid":            {"New", "NewString", "NewRandom", "NewRandomFromReader", "NewUUID", "NewV6", "NewV7"},
	"github.com/gofrs/uuid":             {"NewV1", "NewV4", "NewV6", "NewV7"},
	"github.com/gofrs/uuid/v5":          {"NewV1", "NewV4", "NewV6", "NewV7"},
	"github.com/oklog/ulid":             {"New", "MustNew", "Make"},
	"github.com/oklog/ulid/v2":          {"New", "MustNew", "Make"},
	"github.com/segmentio/ksuid":        {"New", "NewRandom", "NewRandomWithTime"},
	"github.com/rs/xid":                 {"New", "NewWithTime"},
	"crypto/rand":                       {"Text", "Int", "Prime", "Read"},
	"math/rand":                         nil,
	"math/rand/v2":                      nil,
	"time":                              {"Now"},
	"github.com/lithammer/shortuuid/v4": {"New"},
}

// sink is a place a key is set: where, the key, and the value that carries
// it to the call (a context, a request, a header).
type sink struct {
	instr   ssa.Instruction
	what    string
	key     ssa.Value
	carrier ssa.Value
}

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

// sinks returns the keys instr sets.
func sinks(instr ssa.Instruction) []sink {
	switch in := instr.(type) {
	case *ssa.Call:
		return callSinks(in)
	case *ssa.MapUpdate:
		switch {
		case isNamed(in.Map.Type(), "net/http", "Header") && isKeyName(in.Key, headerName):
			return []sink{{instr: in, what: "an Idempotency-Key header", key: in.Value, carrier: headerOwner(in.Map)}}
		case isNamed(in.Map.Type(), metadataPath, "MD") && isKeyName(in.Key, headerName):
			return []sink{{instr: in, what: "the idempotency-key gRPC metadata", key: in.Value, carrier: in.Map}}
		}
	case *ssa.Store:
		if fa, ok := in.Addr.(*ssa.FieldAddr); ok && fieldName(fa) == "RequestId" && isString(in.Val.Type()) {
			return []sink{{instr: in, what: "an AIP-155 request_id", key: in.Val, carrier: fa.X}}
		}
	}
	return nil
}

func callSinks(c *ssa.Call) []sink {
	fn := c.Call.StaticCallee()
	if fn == nil {
		return nil
	}
	args := c.Call.Args
	pkg, name := funcID(fn)
	switch {
	case pkg == idemPath && name == "ContextWithKey" && len(args) == 2:
		return []sink{{instr: c, what: "idem.ContextWithKey", key: args[1], carrier: c}}
	case pkg == "net/http" && (name == "Header.Set" || name == "Header.Add") && len(args) == 3 && isKeyName(args[1], headerName):
		return []sink{{instr: c, what: "an Idempotency-Key header", key: args[2], carrier: headerOwner(args[0])}}
	case pkg == metadataPath && (name == "AppendToOutgoingContext" || name == "Pairs") && len(args) >= 1:
		var out []sink
		kv := variadic(args[len(args)-1])
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] != nil && kv[i+1] != nil && isKeyName(kv[i], headerName) {
				out = append(out, sink{instr: c, what: "the idempotency-key gRPC metadata", key: kv[i+1], carrier: c})
			}
		}
		return out
	case pkg == metadataPath && (name == "MD.Set" || name == "MD.Append") && len(args) == 3 && isKeyName(args[1], headerName):
		var out []sink
		for _, v := range variadic(args[2]) {
			if v != nil {
				out = append(out, sink{instr: c, what: "the idempotency-key gRPC metadata", key: v, carrier: args[0]})
			}
		}
		return out
	}
	return nil
}

// funcID returns fn's package path and name, Type.Method for a method.
func funcID(fn *ssa.Function) (string, string) {
	obj, _ := fn.Object().(*types.Func)
	if fn.Origin() != nil {
		obj, _ = fn.Origin().Object().(*types.Func)
	}
	if obj == nil || obj.Pkg() == nil {
		return "", ""
	}
	name := obj.Name()
	if recv := obj.Type().(*types.Signature).Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	}
	return obj.Pkg().Path(), name
}

// variadic returns the elements of a ...T argument built by the compiler
// (a slice of a local array stored index by index), nil where one is not a
// constant index.
func variadic(v ssa.Value) []ssa.Value {
	sl, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	arr, ok := sl.X.(*ssa.Alloc)
	if !ok {
		return nil
	}
	p, ok := arr.Type().Underlying().(*types.Pointer)
	if !ok {
		return nil
	}
	at, ok := p.Elem().Underlying().(*types.Array)
	if !ok {
		return nil
	}
	out := make([]ssa.Value, at.Len())
	for _, r := range *arr.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		c, ok := ia.Index.(*ssa.Const)
		if !ok || c.Value == nil {
			continue
		}
		i, _ := constant.Int64Val(c.Value)
		if i < 0 || int(i) >= len(out) {
			continue
		}
		for _, rr := range *ia.Referrers() {
			if st, ok := rr.(*ssa.Store); ok && st.Addr == ia {
				out[i] = st.Val
			}
		}
	}
	return out
}

// isKeyName reports whether v is a string constant naming the key header
// (or metadata key), in any case.
func isKeyName(v ssa.Value, name string) bool {
	c, ok := v.(*ssa.Const)
	return ok && c.Value != nil && c.Value.Kind() == constant.String && strings.EqualFold(constant.StringVal(c.Value), name)
}

// isNamed reports whether t is the named type pkg.name.
func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

func fieldName(fa *ssa.FieldAddr) string {
	p, ok := fa.X.Type().Underlying().(*types.Pointer)
	if !ok {
		return "" // a type parameter's core type: not followed
	}
	st, ok := p.Elem().Underlying().(*types.Struct)
	if !ok || fa.Field >= st.NumFields() {
		return ""
	}
	return st.Field(fa.Field).Name()
}

// headerOwner returns what carries header h to the call: the request whose
// Header field it is (req.Header), whose Header method returned it
// (Connect's req.Header()), or h itself.
func headerOwner(h ssa.Value) ssa.Value {
	switch v := h.(type) {
	case *ssa.UnOp:
		if fa, ok := v.X.(*ssa.FieldAddr); ok && v.Op == token.MUL {
			return fa.X
		}
	case *ssa.Call:
		if fn := v.Call.StaticCallee(); fn != nil && fn.Name() == "Header" && len(v.Call.Args) == 1 {
			return v.Call.Args[0]
		}
	}
	return h
}

// freshSource returns the call that makes v fresh (a call of a function
// in the fresh table, whose result v is derived from), or nil.
func freshSource(v ssa.Value, seen map[ssa.Value]bool) *ssa.Call {
	if v == nil || seen[v] || len(seen) > 200 {
		return nil
	}
	seen[v] = true
	switch v := v.(type) {
	case *ssa.Call:
		if isFresh(&v.Call) {
			return v
		}
		// A value computed from a fresh one is fresh: u.String(),
		// fmt.Sprintf("%d", time.Now().UnixNano()), hex.EncodeToString(b).
		if v.Call.IsInvoke() {
			if s := freshSource(v.Call.Value, seen); s != nil {
				return s
			}
		}
		for _, a := range v.Call.Args {
			if s := freshSource(a, seen); s != nil {
				return s
			}
		}
	case *ssa.Extract:
		return freshSource(v.Tuple, seen)
	case *ssa.ChangeType:
		return freshSource(v.X, seen)
	case *ssa.Convert:
		return freshSource(v.X, seen)
	case *ssa.MultiConvert:
		return freshSource(v.X, seen)
	case *ssa.MakeInterface:
		return freshSource(v.X, seen)
	case *ssa.TypeAssert:
		return freshSource(v.X, seen)
	case *ssa.Field:
		return freshSource(v.X, seen)
	case *ssa.Index:
		return freshSource(v.X, seen)
	case *ssa.Lookup:
		return freshSource(v.X, seen)
	case *ssa.BinOp:
		if s := freshSource(v.X, seen); s != nil {
			return s
		}
		return freshSource(v.Y, seen)
	case *ssa.Phi:
		for _, e := range v.Edges {
			if s := freshSource(e, seen); s != nil {
				return s
			}
		}
	case *ssa.UnOp:
		if v.Op == token.MUL {
			return freshMemory(v.X, seen)
		}
		return freshSource(v.X, seen)
	case *ssa.Slice:
		return freshMemory(v.X, seen)
	case *ssa.Alloc, *ssa.MakeSlice:
		return freshMemory(v, seen)
	}
	return nil
}

// freshMemory returns the fresh call that wrote the memory at addr: a
// fresh value stored there, or a random read into it (rand.Read(buf)).
func freshMemory(addr ssa.Value, seen map[ssa.Value]bool) *ssa.Call {
	switch a := addr.(type) {
	case *ssa.FieldAddr:
		addr = a.X
	case *ssa.IndexAddr:
		addr = a.X
	case *ssa.Slice:
		addr = a.X
	}
	switch addr.(type) {
	case *ssa.Alloc, *ssa.MakeSlice:
	default:
		return nil
	}
	refs := addr.Referrers()
	if refs == nil {
		return nil
	}
	var derived []ssa.Value
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Addr == addr {
				if s := freshSource(r.Val, seen); s != nil {
					return s
				}
			}
		case *ssa.FieldAddr:
			derived = append(derived, r)
		case *ssa.IndexAddr:
			derived = append(derived, r)
		case *ssa.Slice:
			derived = append(derived, r)
		case *ssa.Call:
			if isFresh(&r.Call) {
				return r // rand.Read(buf[:]) reading into it
			}
		}
	}
	for _, d := range derived {
		for _, r := range *d.Referrers() {
			switch r := r.(type) {
			case *ssa.Store:
				if r.Addr == d {
					if s := freshSource(r.Val, seen); s != nil {
						return s
					}
				}
			case *ssa.Call:
				if isFresh(&r.Call) {
					return r
				}
			}
		}
	}
	return nil
}

// isFresh reports whether c calls a function of the fresh table, or a
// method of math/rand's generators.
func isFresh(c *ssa.CallCommon) bool {
	fn := c.StaticCallee()
	if fn == nil {
		return false
	}
	pkg, name := funcID(fn)
	names, ok := fresh[pkg]
	if !ok {
		return false
	}
	if names == nil {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// calleeName is the function a fresh call calls, as source spells it.
func calleeName(c *ssa.Call) string {
	fn := c.Call.StaticCallee()
	pkg, name := funcID(fn)
	return pkg[strings.LastIndex(pkg, "/")+1:] + "." + name
}

// sends returns a call inside loop that the key's carrier v reaches: the
// request sent, the method called with the keyed context. Calls that only
// derive another carrier (context.WithTimeout, req.WithContext,
// metadata.NewOutgoingContext) are followed to their result.
func sends(v ssa.Value, loop ast.Node, seen map[ssa.Value]bool) ssa.Instruction {
	if v == nil || seen[v] || len(seen) > 200 {
		return nil
	}
	seen[v] = true
	refs := v.Referrers()
	if refs == nil {
		return nil
	}
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Call:
			if derives(&r.Call) {
				if s := sends(r, loop, seen); s != nil {
					return s
				}
				continue
			}
			if accessor(&r.Call) {
				continue
			}
			if within(loop, r.Pos()) {
				return r
			}
		case *ssa.Go, *ssa.Defer:
			if within(loop, r.Pos()) {
				return r
			}
		case *ssa.Phi, *ssa.ChangeType, *ssa.MakeInterface, *ssa.Extract:
			if s := sends(r.(ssa.Value), loop, seen); s != nil {
				return s
			}
		case *ssa.Store:
			if r.Val != v {
				continue
			}
			var to ssa.Value = r.Addr
			if fa, ok := r.Addr.(*ssa.FieldAddr); ok {
				to = fa.X // req.Header = h: the request carries it
			}
			if s := sends(to, loop, seen); s != nil {
				return s
			}
		case *ssa.UnOp:
			if r.Op == token.MUL {
				if s := sends(r, loop, seen); s != nil {
					return s
				}
			}
		}
	}
	return nil
}

// derives reports whether a call with the carrier only makes another
// carrier: the context and metadata helpers, the request builders.
func derives(c *ssa.CallCommon) bool {
	fn := c.StaticCallee()
	if fn == nil {
		return false
	}
	pkg, name := funcID(fn)
	switch pkg {
	case "context", idemPath, metadataPath:
		return true
	case "net/http":
		return name == "NewRequestWithContext" || name == "Request.WithContext" || name == "Request.Clone"
	}
	return false
}

// accessor reports whether a call with the carrier only reads or sets a
// part of it: a builtin (append, len), a Header method, http.Header's own
// methods. Such a call sends nothing.
func accessor(c *ssa.CallCommon) bool {
	if _, ok := c.Value.(*ssa.Builtin); ok {
		return true
	}
	fn := c.StaticCallee()
	if fn == nil {
		return c.IsInvoke() && c.Method.Name() == "Header"
	}
	pkg, name := funcID(fn)
	return fn.Name() == "Header" || pkg == "net/http" && strings.HasPrefix(name, "Header.")
}

// loopIndex finds the innermost loop around a position within one
// function: a function literal inside a loop (a handler registered per
// route) starts afresh, unless it is called where it is written. A
// function literal handed to a retry library (backoff.Retry) is a loop.
type loopIndex struct {
	loops []ast.Node                  // *ast.ForStmt, *ast.RangeStmt
	funcs []ast.Node                  // *ast.FuncLit not called in place
	calls map[token.Pos]*ast.CallExpr // by Lparen, the position SSA gives a call
}

func newLoopIndex(pass *analysis.Pass) *loopIndex {
	idx := &loopIndex{calls: map[token.Pos]*ast.CallExpr{}}
	called := map[ast.Node]bool{}
	retried := map[ast.Node]bool{}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				idx.calls[n.Lparen] = n
				if fl, ok := ast.Unparen(n.Fun).(*ast.FuncLit); ok {
					called[fl] = true
				}
				if retrier(pass.TypesInfo, n) {
					for _, a := range n.Args {
						if fl, ok := ast.Unparen(a).(*ast.FuncLit); ok {
							retried[fl] = true
						}
					}
				}
			case *ast.ForStmt, *ast.RangeStmt:
				idx.loops = append(idx.loops, n)
			case *ast.FuncLit:
				switch {
				case retried[n]:
					idx.loops = append(idx.loops, n) // the retry library's loop runs it
				case !called[n]:
					idx.funcs = append(idx.funcs, n)
				}
			}
			return true
		})
	}
	return idx
}

// retryPackages are retry libraries whose functions call the function
// literal they are given again on failure: its body is a loop's.
var retryPackages = []string{
	"github.com/cenkalti/backoff", "github.com/avast/retry-go", "github.com/sethvargo/go-retry",
	"k8s.io/client-go/util/retry", "k8s.io/apimachinery/pkg/util/wait", "github.com/hashicorp/go-retryablehttp",
}

// retrier reports whether call calls a function of a retry library.
func retrier(info *types.Info, call *ast.CallExpr) bool {
	var obj types.Object
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		obj = info.Uses[f]
	case *ast.SelectorExpr:
		obj = info.Uses[f.Sel]
	case *ast.IndexExpr: // retry.DoWithData[T](…)
		if sel, ok := ast.Unparen(f.X).(*ast.SelectorExpr); ok {
			obj = info.Uses[sel.Sel]
		}
	}
	if obj == nil || obj.Pkg() == nil {
		return false
	}
	path := obj.Pkg().Path()
	for _, p := range retryPackages {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// innermost returns the innermost loop that holds pos in the same
// function, or nil.
func (idx *loopIndex) innermost(pos token.Pos) ast.Node {
	var best ast.Node
	for _, l := range idx.loops {
		if within(l, pos) && (best == nil || within(best, l.Pos())) {
			best = l
		}
	}
	if best == nil {
		return nil
	}
	for _, f := range idx.funcs {
		if within(f, pos) && within(best, f.Pos()) {
			return nil // pos is in a function literal inside the loop
		}
	}
	return best
}

func within(n ast.Node, pos token.Pos) bool {
	return n != nil && pos.IsValid() && n.Pos() <= pos && pos < n.End()
}
