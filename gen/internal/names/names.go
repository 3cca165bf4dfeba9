package names

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/gen/ir"
)

// The identifiers generated code declares for a receiver R and its
// annotated method M, before Namer makes the unexported ones unique.

// Wrapper is the wrapper type of receiver r: IdempotentPayments.
func Wrapper(r string) string { return "Idempotent" + r }

// Constructor is the wrapper's constructor: NewIdempotentPayments.
func Constructor(r string) string { return "NewIdempotent" + r }

// InTx is the wrapper method running m in the caller's transaction: ChargeInTx.
func InTx(m string) string { return m + "InTx" }

// Sweep is the wrapper method clearing an inline method's expired keys:
// SweepCreateOrderKeys.
func Sweep(m string) string { return "Sweep" + m + "Keys" }

// Test is the generated test function of r.m: TestIdempotentPaymentsCharge.
func Test(r, m string) string { return "Test" + Wrapper(r) + m }

func methodVar(r, m string) string       { return "idem" + r + m }
func guardType(r, m string) string       { return "runGoGenerate" + r + m }
func fingerprintFunc(r, m string) string { return "fingerprint" + r + m }
func fieldsGuard(typeName string) string { return "runGoGenerate" + typeName + "Fields" }

// helper is the fingerprint helper of a named type: fpOrder, or fpUuidUUID
// for another package's type.
func helper(own bool, pkgName, typeName string) string {
	if own {
		return "fp" + typeName
	}
	return "fp" + strings.ToUpper(pkgName[:1]) + pkgName[1:] + typeName
}

// MayCollide reports whether a package-level identifier of the user's could
// take a name Namer hands out: those all start with one of these prefixes.
func MayCollide(s string) bool {
	for _, p := range []string{"idem", "runGoGenerate", "fingerprint", "fp"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// The fixtures a package's tests declare, which the generated tests call.

// ServiceFixture builds the service under test: newPaymentsForTest.
func ServiceFixture(r string) string { return "new" + r + "ForTest" }

// SampleFixture returns a valid request: samplePaymentsChargeArgs.
func SampleFixture(r, m string) string { return "sample" + r + m + "Args" }

// OtherFixture (optional) returns another valid request: otherPaymentsChargeArgs.
func OtherFixture(r, m string) string { return "other" + r + m + "Args" }

// EffectFixture (optional) counts a method's effects: countPaymentsChargeEffects.
func EffectFixture(r, m string) string { return "count" + r + m + "Effects" }

// Names the generated tests declare: the package-level idemtest.Package,
// and the struct of a method's arguments when it does not take exactly one.
const (
	TestPackageVar = "idemgenPackage"
	ArgsType       = "idemgenArgs"
)

// ArgsField is the field of ArgsType holding the i-th argument (from 0),
// whose local name is local: local itself, unless it is a or t, which the
// generated tests' closures declare (argN then).
func ArgsField(local string, i int) string {
	if local == "a" || local == "t" {
		return fmt.Sprintf("arg%d", i+1)
	}
	return local
}

// LoopElem is the variable of the depth-th nested loop over elements.
func LoopElem(depth int) string { return fmt.Sprintf("e%d", depth) }

// LoopKey is the variable of the depth-th nested loop over map keys.
func LoopKey(depth int) string { return fmt.Sprintf("k%d", depth) }

// Reserved reports identifiers the generated wrappers declare or import,
// which a parameter must not shadow.
func Reserved(name string) bool {
	switch name {
	case "w", "ctx", "tx", "f", "v", "err", "idem", "idemtest", "idemproto", "pgx", "context", "time", "errors", "testing",
		"maps", "slices", "reflect", "atomic", "unsafe":
		return true
	}
	// Loop variables: e0, e1, ... and k0, k1, ... (LoopElem, LoopKey).
	if len(name) < 2 || name[0] != 'e' && name[0] != 'k' {
		return false
	}
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Local picks the identifier generated code gives the n-th argument,
// declared as name: name itself when free says it shadows nothing (and it
// is not Reserved), else argN (argN_2, ... if that is taken too).
func Local(name string, n int, free func(string) bool) string {
	ok := func(s string) bool { return !Reserved(s) && free(s) }
	local := name
	for i := 1; !ok(local); i++ {
		local = fmt.Sprintf("arg%d", n)
		if i > 1 {
			local = fmt.Sprintf("arg%d_%d", n, i)
		}
	}
	return local
}

// ServiceDecl is the declaration of ServiceFixture, as a user pastes it.
func ServiceDecl(r string) string {
	return fmt.Sprintf("func %s(t *testing.T, db *idemtest.DB) *%s", ServiceFixture(r), r)
}

// EffectDecl is the declaration of EffectFixture.
func EffectDecl(r, m string) string {
	return fmt.Sprintf("func %s(t *testing.T, db *idemtest.DB) int", EffectFixture(r, m))
}

// SampleDecl is the declaration of SampleFixture: it returns the method's
// arguments after ctx (and tx), each as the source spells its type.
func SampleDecl(r, m string, params []ir.Param) string { return argsDecl(SampleFixture(r, m), params) }

// OtherDecl is the declaration of OtherFixture (SampleDecl's signature).
func OtherDecl(r, m string, params []ir.Param) string { return argsDecl(OtherFixture(r, m), params) }

// OtherWhat says what OtherFixture must do, for messages.
func OtherWhat(key string) string {
	return fmt.Sprintf("returns another valid request for %s, one whose fingerprint differs from the sample's (the mismatch test sends it under the sample's key)", key)
}

func argsDecl(name string, params []ir.Param) string {
	var src []string
	for _, p := range params {
		src = append(src, p.Name+" "+p.Source)
	}
	return pasteable(fmt.Sprintf("func %s(t *testing.T) (%s)", name, strings.Join(src, ", ")))
}

// pasteable formats a function declaration's signature as gofmt would, so
// anonymous structs and long parameter lists read as Go, with struct tags
// in backquotes. It returns decl unchanged if it does not parse.
func pasteable(decl string) string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", "package p\n\n"+decl+" {}\n", 0)
	if err != nil {
		return decl
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
			if v, err := strconv.Unquote(fl.Tag.Value); err == nil && !strings.Contains(v, "`") {
				fl.Tag.Value = "`" + v + "`"
			}
		}
		return true
	})
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f.Decls[0]); err != nil {
		return decl
	}
	s := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(buf.String()), "{}"))
	return strings.ReplaceAll(s, "\n", "\n\t")
}
