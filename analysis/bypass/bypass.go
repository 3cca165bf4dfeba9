// Package bypass defines an Analyzer that reports calls of an idemgen
// annotated method that go around its generated wrapper.
package bypass

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"

	"github.com/idemgen/idemgen/analysis/internal/annot"
)

const doc = `report calls of an idemgen method that bypass its generated wrapper

A method whose doc comment carries a //go:generate idemgen directive is
idempotent only when it is called through its generated wrapper
(IdempotentPayments.Charge for Payments.Charge): the wrapper reads the key,
claims it and replays the stored response. Called directly, as a method
value, a method expression or through the wrapper's inner value, it has no
key, no claim and no replay, and a retry runs it again. The generated
wrapper file, the declaring package's tests and the body of another annotated
method (whose own wrapper's claim covers the call) may call it; any other use is
reported, with the wrapper method to call instead; a use meant to bypass it
(a test proving the harm) says so with a comment on its line or the line
above: //idem:bypass-ok followed by the reason. When exactly one variable
of the wrapper's type is in scope and the wrapper method takes the same
arguments, a suggested fix calls it.`

// Analyzer reports calls of annotated methods outside their wrapper.
var Analyzer = &analysis.Analyzer{
	Name:      "bypass",
	Doc:       doc,
	URL:       "https://pkg.go.dev/github.com/idemgen/idemgen/analysis/bypass",
	Requires:  []*analysis.Analyzer{inspect.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(Annotated)},
}

// Annotated is the fact exported on a method that carries an idemgen
// directive: the name of the wrapper type idemgen generates for its
// receiver.
type Annotated struct {
	// Wrapper is the generated wrapper type, e.g. IdempotentPayments.
	Wrapper string
}

// AFact marks Annotated as an analysis.Fact.
func (*Annotated) AFact() {}

// String returns the wrapper's name, for analysistest's fact expectations.
func (a *Annotated) String() string { return "idemgen wrapper " + a.Wrapper }

func run(pass *analysis.Pass) (any, error) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || annot.Of(fd) == nil {
				continue
			}
			fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			if recv := receiver(fn); recv != nil {
				pass.ExportObjectFact(fn, &Annotated{Wrapper: "Idempotent" + recv.Obj().Name()})
			}
		}
	}
	skip := map[*ast.File]bool{}
	allowed := map[*ast.File]map[int]bool{}
	for _, f := range pass.Files {
		skip[f] = annot.Generated(f)
		allowed[f] = allowedLines(pass.Fset, f)
	}
	ins.WithStack([]ast.Node{(*ast.SelectorExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if !push {
			return true
		}
		sel := n.(*ast.SelectorExpr)
		fn, ok := pass.TypesInfo.Uses[sel.Sel].(*types.Func)
		if !ok {
			return true
		}
		fn = fn.Origin()
		var fact Annotated
		if !pass.ImportObjectFact(fn, &fact) {
			return true
		}
		file := stack[0].(*ast.File)
		if skip[file] || declaringTest(pass, file, fn) || insideAnnotated(stack) {
			return true
		}
		if line := pass.Fset.Position(sel.Sel.Pos()).Line; allowed[file][line] || allowed[file][line-1] {
			return true
		}
		report(pass, sel, stack, fn, &fact)
		return true
	})
	return nil, nil
}

// insideAnnotated reports whether the node at the top of stack is in the
// body of a method that is annotated itself: its own wrapper claims a key
// and runs the body in that claim's transaction, so an annotated method it
// calls bare (an outer service composing an inner one, as example/grpcapi
// does) is covered by the outer claim; calling the inner wrapper there
// would claim a second key for the same intention.
func insideAnnotated(stack []ast.Node) bool {
	for _, n := range stack {
		if fd, ok := n.(*ast.FuncDecl); ok {
			return annot.Of(fd) != nil
		}
	}
	return false
}

// allowedLines returns the lines of f that carry an //idem:bypass-ok
// comment with a reason.
func allowedLines(fset *token.FileSet, f *ast.File) map[int]bool {
	lines := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if reason, ok := strings.CutPrefix(c.Text, "//idem:bypass-ok"); ok && strings.TrimSpace(reason) != "" && (reason[0] == ' ' || reason[0] == '\t') {
				lines[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	return lines
}

// receiver returns the named type fn is a method of, or nil.
func receiver(fn *types.Func) *types.Named {
	sig := fn.Type().(*types.Signature)
	if sig.Recv() == nil {
		return nil
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := t.(*types.Named)
	return n
}

// declaringTest reports whether file is a test file of the package that
// declares fn (its own tests or its external _test package).
func declaringTest(pass *analysis.Pass, file *ast.File, fn *types.Func) bool {
	name := pass.Fset.File(file.Pos()).Name()
	if !strings.HasSuffix(name, "_test.go") {
		return false
	}
	p := pass.Pkg.Path()
	return p == fn.Pkg().Path() || p == fn.Pkg().Path()+"_test"
}

// report reports the use sel of the annotated method fn.
func report(pass *analysis.Pass, sel *ast.SelectorExpr, stack []ast.Node, fn *types.Func, fact *Annotated) {
	recv := receiver(fn)
	what := recv.Obj().Name() + "." + fn.Name()
	var call *ast.CallExpr
	if len(stack) >= 2 {
		if c, ok := stack[len(stack)-2].(*ast.CallExpr); ok && c.Fun == sel {
			call = c
		}
	}
	if call == nil {
		what += " (as a function value)"
	}
	instead := fact.Wrapper + "." + fn.Name()
	wrapper := wrapperType(fn.Pkg(), fact.Wrapper)
	inTx := sameArgs(wrapper, fn.Name()+"InTx", fn)
	if inTx != nil {
		instead = fmt.Sprintf("%s.%sInTx (same arguments, in the caller's transaction) or %s", fact.Wrapper, fn.Name(), instead)
	}
	d := analysis.Diagnostic{
		Pos: sel.Sel.Pos(), End: sel.End(),
		Message: fmt.Sprintf("%s bypasses its idempotent wrapper: called here it has no idempotency key, no claim and no replay, so a retry runs it again; call %s instead",
			what, instead),
	}
	if call != nil {
		d.SuggestedFixes = fix(pass, sel, wrapper, fn, inTx)
	}
	pass.Report(d)
}

// wrapperType returns the wrapper type name declared in pkg, or nil if it is
// not generated yet.
func wrapperType(pkg *types.Package, name string) *types.Named {
	tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
	if !ok {
		return nil
	}
	n, _ := tn.Type().(*types.Named)
	return n
}

// sameArgs returns the method name of wrapper if its signature, receiver
// aside, is identical to fn's: a call of fn then compiles as a call of it.
func sameArgs(wrapper *types.Named, name string, fn *types.Func) *types.Func {
	if wrapper == nil {
		return nil
	}
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(wrapper), true, fn.Pkg(), name)
	m, ok := obj.(*types.Func)
	if !ok {
		return nil
	}
	a, b := m.Type().(*types.Signature), fn.Type().(*types.Signature)
	if types.Identical(types.NewSignatureType(nil, nil, nil, a.Params(), a.Results(), a.Variadic()),
		types.NewSignatureType(nil, nil, nil, b.Params(), b.Results(), b.Variadic())) {
		return m
	}
	return nil
}

// fix offers to call the wrapper method instead of fn at sel when it takes
// the same arguments (inTx, else the wrapper's method of fn's name) and
// exactly one variable of the wrapper's type is in scope.
func fix(pass *analysis.Pass, sel *ast.SelectorExpr, wrapper *types.Named, fn, inTx *types.Func) []analysis.SuggestedFix {
	m := inTx
	if m == nil {
		m = sameArgs(wrapper, fn.Name(), fn)
	}
	if m == nil {
		return nil
	}
	v := wrapperVar(pass, sel.Pos(), wrapper)
	if v == nil || hasCall(sel.X) || soleUse(pass, sel.X) {
		return nil
	}
	text := v.Name() + "." + m.Name()
	return []analysis.SuggestedFix{{
		Message:   "call " + text,
		TextEdits: []analysis.TextEdit{{Pos: sel.Pos(), End: sel.End(), NewText: []byte(text)}},
	}}
}

// hasCall reports whether x calls something: the fix would drop the call.
func hasCall(x ast.Expr) bool {
	found := false
	ast.Inspect(x, func(n ast.Node) bool {
		if _, ok := n.(*ast.CallExpr); ok {
			found = true
		}
		return !found
	})
	return found
}

// soleUse reports whether x, which the fix drops, holds the only use of a
// local variable: dropping it would leave the variable unused, which does
// not compile.
func soleUse(pass *analysis.Pass, x ast.Expr) bool {
	inX := map[*types.Var]bool{}
	ast.Inspect(x, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := pass.TypesInfo.Uses[id].(*types.Var); ok && v.Parent() != v.Pkg().Scope() && !v.IsField() {
				inX[v] = true
			}
		}
		return true
	})
	if len(inX) == 0 {
		return false
	}
	usedElsewhere := map[*types.Var]bool{}
	for id, obj := range pass.TypesInfo.Uses {
		if v, ok := obj.(*types.Var); ok && inX[v] && (id.Pos() < x.Pos() || id.Pos() >= x.End()) {
			usedElsewhere[v] = true
		}
	}
	return len(usedElsewhere) < len(inX)
}

// wrapperVar returns the one variable of type wrapper or *wrapper visible at
// pos, or nil if there is none or more than one.
func wrapperVar(pass *analysis.Pass, pos token.Pos, wrapper *types.Named) *types.Var {
	inner := pass.Pkg.Scope().Innermost(pos)
	var found *types.Var
	n := 0
	seen := map[string]bool{}
	for s := inner; s != nil && s != types.Universe; s = s.Parent() {
		for _, name := range s.Names() {
			if seen[name] {
				continue
			}
			v, ok := s.Lookup(name).(*types.Var)
			if !ok || name == "_" {
				continue
			}
			if _, obj := inner.LookupParent(name, pos); obj != v {
				continue // declared after pos, or shadowed
			}
			seen[name] = true
			t := v.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if types.Identical(t, wrapper) {
				found = v
				n++
			}
		}
	}
	if n != 1 {
		return nil
	}
	return found
}
