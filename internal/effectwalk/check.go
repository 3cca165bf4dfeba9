package effectwalk

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
)

// idemPath is the runtime package whose Step an external method records
// its effects through.
const idemPath = "github.com/idemgen/idemgen/runtime/idem"

// Method names an annotated method to check.
type Method struct {
	Pkg  string // import path
	Recv string // receiver type name
	Name string // method name
	// Steps checks an external method: not its body (an external
	// method's effects are its business), but the closures it passes to
	// idem.Step, and only for database writes outside a transaction.
	Steps bool
}

// Finding is one effect call reachable from a method.
type Finding struct {
	Entry  Entry          // the catalogue entry that names the call
	Callee string         // the function called, e.g. (*net/http.Client).Do
	Pos    token.Position // the call
	// Path is the chain of calls from the method to the function making
	// the effect call, the method excluded: Path[i] is called at
	// Path[i].Pos. Empty when the method makes the call itself.
	Path []Hop
	// Allowed is the reason an //idem:effect-ok comment gives for the
	// call (on the call's line or one of the path's, or on the method's
	// doc comment); "" when the call is reported.
	Allowed   string
	AllowedAt token.Position
	// Exit is the last call of the path in the method's module: the
	// user's own call that leads out of it (into an SDK); invalid when the
	// whole path stays in the module.
	Exit token.Position
	// Handle says where the handle of a statement outside the
	// transaction comes from (s.db, the result of pgxpool.New), when the
	// finding is one.
	Handle string
}

// Hop is a function on the path to an effect.
type Hop struct {
	Func string         // its name, qualified by package name outside the method's package: Bank.Transfer, stripe.Client.New, Payments.Charge.func1
	Pos  token.Position // where the previous function calls it
}

// Problem is a mistake in an //idem:effect-ok comment on a path the walk
// took.
type Problem struct {
	Pos token.Position
	Msg string
}

// Report is what Check found for one method.
type Report struct {
	Pos      token.Position // the method's name
	Findings []Finding      // sorted by position
	Problems []Problem
}

// Check walks everything m can call, in the program, and returns each
// effect call it reaches with the shortest path to it. Calls on the
// method's transaction (pgx.Tx, *sql.Tx) and into leaf packages are not
// followed.
func (p *Program) Check(m Method) (*Report, error) {
	fn, decl, err := p.method(m)
	if err != nil {
		return nil, err
	}
	r := &Report{Pos: p.fset.Position(fn.Pos())}
	w := &walk{p: p, m: m, root: node{fn: fn}, pkg: fn.Pkg.Pkg, report: r, parent: map[node]edge{}, inputs: map[node][]string{}, seen: map[string]bool{}}
	w.docOK, w.docOKPos = p.docOK(decl, r)
	if m.Steps {
		w.parent[w.root] = edge{}
		for _, step := range stepClosures(fn) {
			w.visit(node{fn: step.fn, mask: allInputs &^ freeMask(step.fn)}, edge{from: w.root, pos: step.pos}, nil)
		}
	} else {
		// The transaction is the parameter after ctx (Params[0] is the
		// receiver).
		var mask uint64
		if len(fn.Params) > 2 && isTx(fn.Params[2].Type()) {
			mask = 1 << 2
		}
		w.root.mask = mask
		w.visit(w.root, edge{}, nil)
	}
	w.run()
	sort.SliceStable(r.Findings, func(i, j int) bool { return less(r.Findings[i].Pos, r.Findings[j].Pos) })
	return r, nil
}

func less(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Column < b.Column
}

// method finds the SSA function and declaration of m.
func (p *Program) method(m Method) (*ssa.Function, *ast.FuncDecl, error) {
	lp := p.roots[m.Pkg]
	if lp == nil {
		return nil, nil, fmt.Errorf("package %s is not loaded", m.Pkg)
	}
	if broken(lp) {
		msg := "it does not type-check"
		if err := firstError(lp); err != "" {
			msg += ": " + err
		}
		return nil, nil, fmt.Errorf("cannot check the effects of %s.%s: %s", m.Recv, m.Name, msg)
	}
	sp := p.prog.Package(lp.Types)
	obj := lp.Types.Scope().Lookup(m.Recv)
	tn, ok := obj.(*types.TypeName)
	if sp == nil || !ok {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	sel := p.prog.MethodSets.MethodSet(types.NewPointer(tn.Type())).Lookup(lp.Types, m.Name)
	if sel == nil {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	fn := p.prog.FuncValue(sel.Obj().(*types.Func))
	if fn == nil {
		return nil, nil, fmt.Errorf("cannot find %s.%s in %s", m.Recv, m.Name, m.Pkg)
	}
	decl, _ := fn.Syntax().(*ast.FuncDecl)
	return fn, decl, nil
}

// step is a function handed to idem.Step.
type step struct {
	fn  *ssa.Function
	pos token.Pos
}

// freeMask is the bits of fn's free variables.
func freeMask(fn *ssa.Function) uint64 {
	var m uint64
	for i := range fn.FreeVars {
		if b := len(fn.Params) + i; b < 64 {
			m |= 1 << b
		}
	}
	return m
}

// stepClosures returns the functions fn (and the closures it declares)
// passes to idem.Step.
func stepClosures(fn *ssa.Function) []step {
	var out []step
	var scan func(f *ssa.Function)
	scan = func(f *ssa.Function) {
		for _, b := range f.Blocks {
			for _, instr := range b.Instrs {
				c, ok := instr.(ssa.CallInstruction)
				if !ok {
					continue
				}
				callee := c.Common().StaticCallee()
				if callee == nil || len(c.Common().Args) < 3 {
					continue
				}
				if o := origin(callee); o.Pkg == nil || o.Pkg.Pkg.Path() != idemPath || o.Name() != "Step" {
					continue
				}
				if g := funcOf(c.Common().Args[2]); g != nil {
					out = append(out, step{fn: g, pos: c.Pos()})
				}
			}
		}
		for _, anon := range f.AnonFuncs {
			scan(anon)
		}
	}
	scan(fn)
	return out
}

// firstError is the first error of pkg or of its dependencies.
func firstError(pkg *packages.Package) string {
	var first string
	packages.Visit([]*packages.Package{pkg}, nil, func(p *packages.Package) {
		if first == "" && len(p.Errors) > 0 {
			first = p.Errors[0].Error()
		}
	})
	return first
}

func isTx(t types.Type) bool {
	if n := namedOf(t); n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/jackc/pgx/v5" && n.Obj().Name() == "Tx" {
		return true
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		if n := namedOf(p.Elem()); n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "database/sql" && n.Obj().Name() == "Tx" {
			return true
		}
	}
	return false
}
