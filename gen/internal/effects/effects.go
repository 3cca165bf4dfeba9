// Package effects is the generator's effect stage: after the models are
// built and their wrappers rendered, it walks what every atomic and inline
// method can call (package internal/effectwalk, the walk idemvet's
// effects check shares) and refuses each effect outside its transaction
// that no //idem:effect-ok comment allows. The effects allowed go into
// the models, for the wrappers' doc comments.
package effects

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/gen/internal/load"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/internal/effectwalk"
)

// Check walks, for every atomic and inline method of models, what it can
// call (package internal/effectwalk), and refuses each effect outside
// its transaction that no //idem:effect-ok comment allows; for external
// methods, only what the functions they pass to idem.Step reach, and only
// writes through another database handle. The effects allowed go into the
// methods' models (ir.Method.Effects), for their doc comments. dir is the
// directory the run's patterns are relative to; loaded are the generator's
// loaded packages, by import path. files are the run's new outputs: the
// program is loaded as it will be once they are written, so code that
// already calls the wrappers type-checks.
//
// The walk loads the program a second time, through effectwalk.Load: it
// cannot reuse the generator's load (gen/internal/load), for two reasons.
// That load reads the generator's own files as their bare package clause
// (stale output must never stop a regeneration), so code that calls the
// wrappers does not type-check there, and the walk builds SSA only for
// packages that type-check: it needs the wrappers about to be written
// (files), which exist only after that load. And that load reads every
// dependency from export data, without function bodies, while the walk
// must enter the bodies of the module's dependencies (a payment SDK's own
// net/http call); type-checking them from source in the first load would
// slow every run, checked or not. Measured on this repository's
// examples: the generator's load of ./example and of ./example/outbox
// reports "undefined: IdempotentPayments" (api.go) and "undefined:
// IdempotentMailer" (worker.go) in the very packages to check, and holds
// syntax for the named packages alone (1, 3 and 1 in example,
// example/sqlc and example/outbox). The second load is made only for the
// packages with a method to check (targets), once per set of build tags.
func Check(ctx context.Context, dir string, loaded map[string]*load.Package, models []*ir.Package, files map[string][]byte) (diag.ErrorList, error) {
	byTags := map[string][]*ir.Package{}
	for _, m := range models {
		if len(targets(loaded[m.Path], m)) > 0 {
			t := loaded[m.Path].Tags
			byTags[t] = append(byTags[t], m)
		}
	}
	overlay := map[string][]byte{}
	for p, b := range files {
		if b != nil && strings.HasSuffix(p, ".go") {
			overlay[p] = b
		}
	}
	var all diag.ErrorList
	for _, tags := range load.SortedKeys(byTags) {
		var paths []string
		for _, m := range byTags[tags] {
			paths = append(paths, m.Path)
		}
		prog, err := effectwalk.Load(ctx, effectwalk.Config{Dir: dir, Patterns: paths, Tags: tags, Overlay: overlay})
		if err != nil {
			return nil, err
		}
		for _, m := range byTags[tags] {
			for _, t := range targets(loaded[m.Path], m) {
				r, err := prog.Check(t.check)
				if err != nil {
					return nil, err
				}
				all = append(all, effectErrors(t.m, r, m.Dir)...)
			}
		}
	}
	return all, nil
}

// target is a method whose effects are checked.
type target struct {
	m     *ir.Method
	check effectwalk.Method
}

// targets are the methods of m to check: every atomic and inline one, and
// the external ones that call idem.Step.
func targets(l *load.Package, m *ir.Package) []target {
	var out []target
	for _, r := range m.Receivers {
		for _, meth := range r.Methods {
			c := effectwalk.Method{Pkg: m.Path, Recv: meth.Receiver, Name: meth.Name}
			if meth.Mode == ir.ModeExternal {
				if !callsStep(l, meth) {
					continue
				}
				c.Steps = true
			}
			out = append(out, target{m: meth, check: c})
		}
	}
	return out
}

// callsStep reports whether an external method's body calls idem.Step:
// only then is there something to check (read from the syntax, so a
// package without it loads nothing more).
func callsStep(l *load.Package, m *ir.Method) bool {
	found := false
	for _, f := range l.Pkg.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv == nil || fd.Name.Name != m.Name || recvName(fd) != m.Receiver {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return !found
				}
				if fn, ok := l.Pkg.TypesInfo.Uses[id].(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == ir.IdemPath && fn.Name() == "Step" {
					found = true
				}
				return !found
			})
		}
	}
	return found
}

// recvName is the receiver type's name of a method declaration.
func recvName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

// effectErrors turns what the walk found for m into errors (the effects
// no comment allows, the comments without a reason) and m.Effects (the
// ones allowed).
func effectErrors(m *ir.Method, r *effectwalk.Report, pkgDir string) diag.ErrorList {
	var out diag.ErrorList
	m.Effects = nil
	for _, pr := range r.Problems {
		out = append(out, &diag.Error{Pos: pr.Pos, Msg: pr.Msg})
	}
	for _, f := range r.Findings {
		path := f.Path
		if m.Mode == ir.ModeExternal && len(path) > 0 {
			path = path[1:] // the function given to idem.Step
		}
		var via []string
		for _, h := range path {
			via = append(via, h.Func)
		}
		if f.Allowed != "" {
			m.Effects = append(m.Effects, ir.Effect{Call: f.Callee, Via: via, Pos: shortPos(pkgDir, f.Pos), Reason: f.Allowed})
			continue
		}
		out = append(out, &diag.Error{Pos: r.Pos, Msg: effectMessage(m, f, via)})
	}
	sort.SliceStable(m.Effects, func(i, j int) bool { return m.Effects[i].Pos < m.Effects[j].Pos })
	return out
}

// effectMessage says, in the compiler's style, why an effect escapes m's
// transaction and what to do.
func effectMessage(m *ir.Method, f effectwalk.Finding, via []string) string {
	tx := "pgx.Tx"
	if m.Tx == ir.TxSQL {
		tx = "*sql.Tx"
	}
	call := f.Callee
	if len(via) > 0 {
		call += " via " + strings.Join(via, " → ")
	}
	call += " (" + f.Pos.String()
	if at := firstCall(m, f); at.IsValid() && at != f.Pos {
		call += ", called at " + at.String()
	}
	if f.Exit.IsValid() && f.Exit != firstCall(m, f) {
		call += ", leaving the module at " + f.Exit.String()
	}
	call += ")"
	through := ""
	if f.Handle != "" {
		through = " through " + f.Handle
	}
	if m.Mode == ir.ModeExternal {
		step := ""
		if len(f.Path) > 0 {
			step = " (" + f.Path[0].Pos.String() + ")"
		}
		return fmt.Sprintf("%s is external, and the function it passes to idem.Step%s calls %s%s, outside any transaction: if the attempt dies before the step's result is recorded, the attempt that takes over runs the step again and repeats the write. Make the write safe to repeat and mark it %s <why>, or move it into an atomic method.",
			m.Key, step, call, through, effectwalk.OKDirective)
	}
	if f.Entry.Kind == effectwalk.KindDatabase {
		return fmt.Sprintf("%s is %s, but it calls %s%s, which is not its transaction (nor derived from it): a write there is not undone when the transaction rolls back, so a retry repeats it (and a read does not see the transaction's own writes). Run it on the method's %s instead, or mark it %s <why repeating it is safe>.",
			m.Key, m.Mode, call, through, tx, effectwalk.OKDirective)
	}
	return fmt.Sprintf("%s is %s, but it calls %s: that call is not undone when the transaction rolls back, so a retry repeats it. Make %s external (take no %s), or move the call after the commit (an outbox), or mark it %s <why repeating it is safe>.",
		m.Key, m.Mode, call, m.Name, tx, effectwalk.OKDirective)
}

// firstCall is the call in m's body that starts f's path (for an
// external method, in the function it passes to idem.Step).
func firstCall(m *ir.Method, f effectwalk.Finding) token.Position {
	i := 0
	if m.Mode == ir.ModeExternal {
		i = 1
	}
	if i < len(f.Path) {
		return f.Path[i].Pos
	}
	return f.Pos
}

// shortPos is a call's position as a generated doc comment prints it,
// the same on every machine: file:line relative to the package's
// directory, or, outside the module, below the module cache.
func shortPos(pkgDir string, pos token.Position) string {
	name := pos.Filename
	if r, err := filepath.Rel(pkgDir, name); err == nil && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		name = r
	} else if _, rest, ok := strings.Cut(filepath.ToSlash(name), "/pkg/mod/"); ok {
		name = rest
	} else if r, err := filepath.Rel(pkgDir, name); err == nil && strings.Count(r, "..") <= 3 {
		name = r
	} else {
		name = filepath.Base(name)
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(name), pos.Line)
}

// HasEffects reports a package with a method whose doc comment lists
// allowed effects.
func HasEffects(m *ir.Package) bool {
	for _, r := range m.Receivers {
		for _, meth := range r.Methods {
			if len(meth.Effects) > 0 {
				return true
			}
		}
	}
	return false
}
