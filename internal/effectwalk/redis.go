package effectwalk

import (
	"fmt"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// rueidisCall reports a rueidis Do or DoMulti call and whether it
// writes: the command's name is the builder method chained on B()
// (client.B().Set().Key("k").Value("v").Build() is SET); a command the
// walk cannot read counts as a write.
func rueidisCall(c *ssa.CallCommon) (callee string, write, ok bool) {
	var name string
	var args []ssa.Value
	if c.IsInvoke() {
		named := namedOf(c.Value.Type())
		if named == nil || named.Obj().Pkg() == nil || !under(named.Obj().Pkg().Path(), []string{"github.com/redis/rueidis"}) {
			return "", false, false
		}
		name = c.Method.Name()
		callee = fmt.Sprintf("(%s.%s).%s", named.Obj().Pkg().Path(), named.Obj().Name(), name)
		args = c.Args
	} else {
		g := c.StaticCallee()
		if g == nil || !under(funcPkg(g), []string{"github.com/redis/rueidis"}) || g.Signature.Recv() == nil {
			return "", false, false
		}
		obj, isFunc := origin(g).Object().(*types.Func)
		if !isFunc {
			return "", false, false
		}
		name = obj.Name()
		callee = qualifiedName(obj)
		if len(c.Args) > 0 {
			args = c.Args[1:]
		}
	}
	if name != "Do" && name != "DoMulti" && name != "DoStream" && name != "DoMultiStream" {
		return "", false, false
	}
	if len(args) < 2 {
		return callee, true, true
	}
	cmds := []ssa.Value{args[1]}
	if name == "DoMulti" || name == "DoMultiStream" {
		cmds = sliceElems(args[1])
		if cmds == nil {
			return callee, true, true
		}
	}
	for _, v := range cmds {
		cmd, known := rueidisCommand(v)
		if !known || rueidisWrite(cmd) {
			if known {
				callee += " " + strings.ToUpper(cmd)
			}
			return callee, true, true
		}
	}
	return callee, false, true
}

// rueidisCommand follows a built command back to the builder method that
// named it.
func rueidisCommand(v ssa.Value) (string, bool) {
	for depth := 0; depth < 64; depth++ {
		switch x := v.(type) {
		case *ssa.Call:
			if x.Call.IsInvoke() {
				return "", false
			}
			g := x.Call.StaticCallee()
			if g == nil || g.Signature.Recv() == nil || len(x.Call.Args) == 0 {
				return "", false
			}
			if n := namedOf(derefType(g.Signature.Recv().Type())); n != nil && n.Obj().Name() == "Builder" {
				return g.Name(), true
			}
			v = x.Call.Args[0]
		case *ssa.ChangeType:
			v = x.X
		case *ssa.Convert:
			v = x.X
		case *ssa.UnOp:
			v = x.X
		default:
			return "", false
		}
	}
	return "", false
}

// sliceElems are the values stored in the array a variadic slice was made
// from, nil when it was not made there.
func sliceElems(v ssa.Value) []ssa.Value {
	s, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	arr, ok := s.X.(*ssa.Alloc)
	if !ok || arr.Referrers() == nil {
		return nil
	}
	var out []ssa.Value
	for _, r := range *arr.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok || ia.Referrers() == nil {
			continue
		}
		for _, rr := range *ia.Referrers() {
			if st, ok := rr.(*ssa.Store); ok && st.Addr == ia {
				out = append(out, st.Val)
			}
		}
	}
	return out
}

// redisReadDo reports a go-redis Do given a constant command name that
// does not write (rdb.Do(ctx, "GET", k)): not an effect.
func redisReadDo(c *ssa.CallCommon) bool {
	var name string
	var args []ssa.Value
	if c.IsInvoke() {
		name, args = c.Method.Name(), c.Args
	} else if g := c.StaticCallee(); g != nil && g.Signature.Recv() != nil && len(c.Args) > 0 {
		name, args = g.Name(), c.Args[1:]
	}
	if name != "Do" || len(args) < 2 || !under(funcPkgOf(c), []string{"github.com/redis/go-redis", "github.com/go-redis/redis"}) {
		return false
	}
	elems := sliceElems(args[1])
	if len(elems) == 0 {
		return false
	}
	v := elems[0]
	if mi, ok := v.(*ssa.MakeInterface); ok {
		v = mi.X
	}
	k, ok := v.(*ssa.Const)
	if !ok || k.Value == nil || k.Value.Kind() != constant.String {
		return false
	}
	return !rueidisWrite(constant.StringVal(k.Value))
}
