package freshkey

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"
)

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
