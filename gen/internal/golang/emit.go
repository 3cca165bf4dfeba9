// Package golang prints a package model (ir) as the wrappers file,
// idem_gen.go: wrapper types and methods, the runtime's method
// descriptions, fingerprint functions and helpers, compile-time guards, and
// their doc prose. It also holds the rendering helpers the generated tests'
// emitter (package gotest) shares: the one ir.Type → jen.Code function,
// files, comments. Names come from package names; it imports neither
// go/types nor x/tools.
package golang

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/gen/stamp"
)

// Emitter renders the Go files of one package model.
type Emitter struct {
	m     *ir.Package
	names *names.Table
	named map[string]*ir.Named // by PkgPath + "." + Name

	emptyIsNil bool // see nilCond
	cyclic     bool // writing the helper of a recursive type: see guard
}

// New returns the emitter of m, with the names of m's generated identifiers
// allocated (names.For).
func New(m *ir.Package) *Emitter {
	e := &Emitter{m: m, names: names.For(m), named: map[string]*ir.Named{}}
	for _, n := range m.Named {
		e.named[n.Type.NamedKey()] = n
	}
	return e
}

// NewFile starts a generated file of package m: the header, the build
// constraint and the import names.
func NewFile(m *ir.Package) *jen.File {
	f := jen.NewFilePathName(m.Path, m.Name)
	f.HeaderComment(stamp.Header)
	if m.Constraint != "" {
		f.HeaderComment("//go:build " + m.Constraint)
	}
	f.ImportName("context", "context")
	f.ImportName("time", "time")
	f.ImportName("errors", "errors")
	f.ImportName("testing", "testing")
	f.ImportName("reflect", "reflect")
	f.ImportName("maps", "maps")
	f.ImportName("slices", "slices")
	f.ImportName("sync/atomic", "atomic")
	f.ImportName(ir.PgxPath, "pgx")
	f.ImportName(ir.SQLPath, "sql")
	f.ImportName(ir.IdemPath, "idem")
	f.ImportName(ir.IdemtestPath, "idemtest")
	f.ImportName(ir.IdemprotoPath, "idemproto")
	return f
}

// Render prints f.
func Render(f *jen.File) ([]byte, error) {
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("render generated code: %w", err)
	}
	return buf.Bytes(), nil
}

// File renders the wrappers file, without its stamp. The compile-time
// guards come first: when a method or a request type changes without go
// generate, the compiler reports errors in file order, so its first error
// names a guard (runGoGenerate…), which says what to do, before the
// wrapper's own broken call does.
func (e *Emitter) File() ([]byte, error) {
	f := NewFile(e.m)
	helpers := slices.Clone(e.m.Named)
	slices.SortFunc(helpers, func(a, b *ir.Named) int {
		return strings.Compare(e.names.Helper(a.Type.NamedKey()), e.names.Helper(b.Type.NamedKey()))
	})
	e.guards(f, helpers)
	for _, r := range e.m.Receivers {
		f.Add(e.wrapperType(r))
		f.Add(e.constructor(r))
		for _, m := range r.Methods {
			if m.Mode == ir.ModeInline {
				e.inlineMethod(f, r, m)
				continue
			}
			f.Add(e.methodVar(m))
			f.Add(e.wrapperMethod(r, m, false))
			if m.Mode == ir.ModeAtomic {
				f.Add(e.wrapperMethod(r, m, true))
			}
			f.Add(e.fingerprintFunc(m))
		}
	}
	for _, n := range helpers {
		f.Add(e.fingerprintHelper(n))
	}
	return Render(f)
}

// Names is the naming table of the model.
func (e *Emitter) Names() *names.Table { return e.names }
