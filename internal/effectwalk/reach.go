package effectwalk

import (
	"fmt"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

// reach returns what fn reaches, each catalogued call once, by the
// shortest path found. A statement through a handle that may come from
// fn's inputs is conditional (Reached.Cond): the caller decides, from
// what it passes, whether that handle is its transaction's.
func (s *summary) reach(fn *ssa.Function) []Reached {
	if r, ok := s.memo[fn]; ok {
		return r
	}
	if s.busy[fn] {
		return nil // a cycle: its other paths are found from its first entry
	}
	s.busy[fn] = true
	var out []Reached
	seen := map[string]int{}
	add := func(e Reached) {
		k := e.Pos + " " + e.Callee
		if i, ok := seen[k]; ok {
			if len(e.Via) < len(out[i].Via) {
				out[i] = e
			} else if len(e.Via) == len(out[i].Via) {
				out[i].Cond |= e.Cond
			}
			return
		}
		seen[k] = len(out)
		out = append(out, e)
	}
	position := func(pos token.Pos) string {
		if !pos.IsValid() {
			return ""
		}
		return s.pass.Fset.Position(pos).String()
	}
	// through adds what g reaches, called at pos with args (receiver
	// first; nil when g is taken as a value, whose parameters' origin is
	// unknown) and, for a closure, bindings.
	through := func(g *ssa.Function, pos token.Pos, es []Reached, args []ssa.Value, bindings []ssa.Value) {
		if s.allowedAt(pos) {
			return
		}
		for _, e := range es {
			r := Reached{Callee: e.Callee, Kind: e.Kind, Via: append([]string{s.name(g)}, e.Via...), Pos: e.Pos, Handle: e.Handle, HandleParam: -1, At: position(pos)}
			if r.Pos == "" {
				r.Pos = position(pos)
			}
			if e.Cond != 0 || e.HandleParam >= 0 {
				inside := false
				for i := 0; i < 64; i++ {
					if e.Cond&(1<<i) == 0 {
						continue
					}
					v, known := input(g, i, args, bindings)
					if !known {
						inside = true // a callback's parameter: its origin is unknown
						break
					}
					if v != nil {
						r.Cond |= s.flows.of(v)
					}
				}
				if inside {
					continue
				}
				if e.HandleParam >= 0 {
					if v, _ := input(g, e.HandleParam, args, bindings); v != nil {
						h := describe(v)
						r.HandleParam, r.Handle = h.Param, h.Path+e.Handle
					}
				}
			}
			add(r)
		}
	}
	direct := func(pos token.Pos, e Entry, callee string) {
		if s.allowedAt(pos) {
			return
		}
		add(Reached{Callee: callee, Kind: e.Kind, Pos: position(pos), HandleParam: -1, At: position(pos)})
	}
	enter := func(g *ssa.Function, pos token.Pos, args, bindings []ssa.Value) {
		o := origin(g)
		if o.Pkg != nil && o.Pkg.Pkg == s.pass.Pkg && len(g.Blocks) > 0 || g.Parent() != nil {
			through(g, pos, s.reach(g), args, bindings)
			return
		}
		obj, ok := o.Object().(*types.Func)
		if !ok || obj.Pkg() == nil || leaf(obj.Pkg().Path()) {
			return
		}
		var f Reaches
		if s.pass.ImportObjectFact(obj, &f) {
			through(g, pos, f.Effects, args, bindings)
		}
	}
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			var callee ssa.Value
			if c, ok := instr.(ssa.CallInstruction); ok {
				common := c.Common()
				pos := c.Pos()
				if !common.IsInvoke() {
					callee = common.Value
				}
				if name, ok := statement(common); ok {
					if _, _, isCat := catalogued0(common); !isCat {
						if s.allowedAt(pos) {
							goto operands
						}
						var cond uint64
						for _, v := range statementInputs(common) {
							cond |= s.flows.of(v)
						}
						r := Reached{Callee: name, Kind: KindDatabase, Pos: position(pos), Cond: cond, HandleParam: -1, At: position(pos)}
						if h := statementHandle(common, common.StaticCallee()); h != nil {
							d := describe(h)
							r.HandleParam, r.Handle = d.Param, d.Path
						}
						add(r)
						goto operands
					}
				}
				if name, write, ok := rueidisCall(common); ok {
					if write {
						direct(pos, Entry{Kind: KindStore}, name)
					}
					goto operands
				}
				if e, name, ok := funcTypeCall(common); ok {
					direct(pos, e, name)
					goto operands
				}
				if redisReadDo(common) {
					goto operands
				}
				switch {
				case common.IsInvoke():
					named := namedOf(common.Value.Type())
					if named != nil && named.Obj().Pkg() != nil {
						path := named.Obj().Pkg().Path()
						if e, ok := lookup(path, named.Obj().Name(), common.Method.Name()); ok {
							direct(pos, e, fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), common.Method.Name()))
							break
						}
						if leaf(path) {
							break
						}
					}
					it, _ := common.Value.Type().Underlying().(*types.Interface)
					args := append([]ssa.Value{common.Value}, common.Args...)
					for _, t := range s.types {
						if it == nil || !types.Implements(t, it) {
							continue
						}
						g := s.pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA).Pkg.Prog.LookupMethod(t, common.Method.Pkg(), common.Method.Name())
						if g == nil {
							continue
						}
						if e, name, ok := catalogued(g); ok {
							if !e.Static {
								direct(pos, e, name)
							}
							continue
						}
						enter(g, pos, args, nil)
					}
				default:
					g := common.StaticCallee()
					if g == nil {
						if field := fieldOf(common.Value); field != nil {
							for _, h := range s.fieldFuncs()[field] {
								if e, name, ok := catalogued(h); ok {
									if !e.Static {
										direct(pos, e, name)
									}
									continue
								}
								enter(h, pos, nil, nil)
							}
						}
						break
					}
					if e, name, ok := catalogued(g); ok {
						switch {
						case e.Kind == KindDatabase && len(common.Args) > 0 && connOfTx(common.Args[0]):
						case e.Kind == KindFile && len(common.Args) > 0 && stdStream(common.Args[0]):
						case readOnlyOpen(g, common.Args):
						default:
							if s.allowedAt(pos) {
								break
							}
							r := Reached{Callee: name, Kind: e.Kind, Pos: position(pos), HandleParam: -1, At: position(pos)}
							if e.Kind == KindDatabase && len(common.Args) > 0 {
								d := describe(common.Args[0])
								r.HandleParam, r.Handle = d.Param, d.Path
							}
							add(r)
						}
						break
					}
					if e, name, ok := beginFunc(g, common.Args); ok {
						direct(pos, e, name)
						break
					}
					var bindings []ssa.Value
					if mc, ok := common.Value.(*ssa.MakeClosure); ok {
						bindings = mc.Bindings
					}
					enter(g, pos, common.Args, bindings)
				}
			}
		operands:
			var ops []*ssa.Value
			for _, op := range instr.Operands(ops) {
				if op == nil || *op == callee {
					continue
				}
				if g := funcOf(*op); g != nil {
					var bindings []ssa.Value
					if mc, ok := (*op).(*ssa.MakeClosure); ok {
						bindings = mc.Bindings
					}
					enter(g, instr.Pos(), nil, bindings)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos < out[j].Pos })
	delete(s.busy, fn)
	s.memo[fn] = out
	return out
}

// input is the value a call passes for input i of g (its parameters, then
// its free variables): known is false when g is taken as a value and i
// is a parameter; v is nil when the call passes nothing there.
func input(g *ssa.Function, i int, args, bindings []ssa.Value) (v ssa.Value, known bool) {
	// A function of another package has no parameters in this program
	// (no body): count them from its signature.
	params := g.Signature.Params().Len()
	if g.Signature.Recv() != nil {
		params++
	}
	if i < params {
		if args == nil {
			return nil, false
		}
		if i < len(args) {
			return args[i], true
		}
		return nil, true
	}
	if j := i - params; j < len(bindings) {
		return bindings[j], true
	}
	return nil, true
}

// fieldFuncs indexes the functions the package stores in struct fields.
func (s *summary) fieldFuncs() map[*types.Var][]*ssa.Function {
	if s.fields == nil {
		s.fields = map[*types.Var][]*ssa.Function{}
		storedFuncs(s.pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA).SrcFuncs, s.fields)
	}
	return s.fields
}

// allowedAt reports an //idem:effect-ok with a reason on the line of pos
// or alone on the line above.
func (s *summary) allowedAt(pos token.Pos) bool {
	p := s.pass.Fset.Position(pos)
	lines := s.oks[p.Filename]
	return lines[p.Line] != "" || lines[p.Line-1] != ""
}

// name is how facts name fn: pkg.Recv.Method or pkg.Func, qualified by
// package name; closures as the runtime names them. Messages drop the
// analysed package's name (local).
func (s *summary) name(fn *ssa.Function) string {
	w := &walk{}
	return w.name(fn)
}

// local drops the analysed package's name from the names of a path.
func (s *summary) local(via []string) []string {
	out := make([]string, len(via))
	for i, v := range via {
		out[i] = strings.TrimPrefix(v, s.pass.Pkg.Name()+".")
	}
	return out
}
