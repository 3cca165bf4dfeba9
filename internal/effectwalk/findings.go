package effectwalk

import (
	"fmt"
	"go/token"
	"go/types"
	"os"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// found records the effect call at pos in fn, with its path.
func (w *walk) found(n node, pos token.Pos, e Entry, callee, handle string) {
	if w.m.Steps && e.Kind != KindDatabase {
		return
	}
	position := w.p.fset.Position(pos)
	key := position.String() + " " + callee
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	f := Finding{Entry: e, Callee: callee, Pos: position, Handle: handle}
	var chain []node
	for g := n; g != w.root && g.fn != nil; g = w.parent[g].from {
		chain = append(chain, g)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		g := chain[i]
		f.Path = append(f.Path, Hop{Func: w.name(g.fn), Pos: w.p.fset.Position(w.parent[g].pos)})
	}
	// A call without a position (in a synthetic wrapper) is placed at the
	// nearest call of the path that has one.
	for i := len(f.Path) - 1; i >= 0 && !f.Pos.IsValid(); i-- {
		f.Pos = f.Path[i].Pos
	}
	for i := len(f.Path) - 1; i > 0; i-- {
		if !f.Path[i].Pos.IsValid() {
			f.Path[i].Pos = f.Path[i-1].Pos
		}
	}
	if dir := w.moduleDir(); dir != "" && !within(dir, f.Pos.Filename) {
		for i := len(f.Path) - 1; i >= 0; i-- {
			if within(dir, f.Path[i].Pos.Filename) {
				f.Exit = f.Path[i].Pos
				break
			}
		}
	}
	f.Allowed, f.AllowedAt = w.allowed(f)
	w.report.Findings = append(w.report.Findings, f)
}

// allowed returns the reason of the //idem:effect-ok comment that allows
// f, on a line of its path or the method's doc comment.
func (w *walk) allowed(f Finding) (string, token.Position) {
	lines := []token.Position{f.Pos}
	for _, h := range f.Path {
		lines = append(lines, h.Pos)
	}
	for _, at := range lines {
		if ok, found := w.p.okAt(at, w.report); found {
			return ok.reason, ok.pos
		}
	}
	return w.docOK, w.docOKPos
}

// name is how messages name fn: Recv.Method or Func, qualified by package
// name outside the checked method's package; closures as the runtime
// names them (Payments.Charge.func1).
func (w *walk) name(fn *ssa.Function) string {
	if fn.Parent() != nil {
		n := 1
		for i, a := range fn.Parent().AnonFuncs {
			if a == fn {
				n = i + 1
			}
		}
		return fmt.Sprintf("%s.func%d", w.name(fn.Parent()), n)
	}
	o := origin(fn)
	obj, _ := o.Object().(*types.Func)
	if obj == nil {
		return fn.String()
	}
	prefix := ""
	if obj.Pkg() != nil && obj.Pkg() != w.pkg {
		prefix = obj.Pkg().Name() + "."
	}
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return prefix + obj.Name()
	}
	rt := sig.Recv().Type()
	if p, ok := types.Unalias(rt).(*types.Pointer); ok {
		rt = p.Elem()
	}
	if n := namedOf(rt); n != nil {
		return prefix + n.Obj().Name() + "." + obj.Name()
	}
	return prefix + obj.Name()
}

// moduleDir is the directory of the checked method's module.
func (w *walk) moduleDir() string {
	if lp := w.p.roots[w.m.Pkg]; lp != nil && lp.Module != nil {
		return lp.Module.Dir
	}
	return ""
}

// within reports a file below dir.
func within(dir, file string) bool {
	return file != "" && strings.HasPrefix(file, dir+string(os.PathSeparator))
}
