package freshkey

import (
	"go/token"
	"strings"

	"golang.org/x/tools/go/ssa"
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
