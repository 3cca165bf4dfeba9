package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/internal/gotest"
	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/gen/stamp"
)

// The model, re-exported: see package ir.
type (
	Package  = ir.Package
	Receiver = ir.Receiver
	Method   = ir.Method
	Param    = ir.Param
	Scalar   = ir.Scalar
	Type     = ir.Type
	Kind     = ir.Kind
	Field    = ir.Field
	Named    = ir.Named
	Inline   = ir.Inline
	Mode     = ir.Mode
)

// The modes, re-exported: see ir.Mode.
const (
	ModeAtomic   = ir.ModeAtomic
	ModeExternal = ir.ModeExternal
	ModeInline   = ir.ModeInline
)

// Errors, re-exported: see package diag.
type (
	// Error is a problem at a position in the user's source.
	Error = diag.Error
	// ErrorList is every problem found in a run, sorted by position.
	ErrorList = diag.ErrorList
)

// Directive is one parsed //go:generate idemgen line: see package directive.
type Directive = directive.Directive

// ParseDirectiveArgs parses the flags of a directive (everything after the
// command). Unknown, repeated or malformed flags and positional arguments
// are errors.
func ParseDirectiveArgs(args []string) (*Directive, []string) { return directive.Parse(args) }

// Flag is one of idemgen's flags: see directive.Flag.
type Flag = directive.Flag

// Where a flag is taken, re-exported: see directive.Where.
const (
	InDirective  = directive.InDirective
	InPackageRun = directive.InPackageRun
)

// Flags returns every flag idemgen takes, in the order -h lists them: the
// one table the directive parser, the command's flag set and -h derive from.
func Flags() []Flag { return directive.FlagTable() }

// FlagHelp is the flag list -h prints (and the README carries), rendered
// from Flags.
func FlagHelp() string { return directive.Help() }

// Header is the first line of every Go file idemgen writes.
const Header = stamp.Header

// NoMismatch says why the generated tests of m (a method of p) have no
// mismatch scenario and, when p has tests, how to add one; "" when they
// have one.
func NoMismatch(p *Package, m *Method) string {
	if !m.NoMismatch() {
		return ""
	}
	return gotest.NoMismatch(p, m)
}

// EffectFixtureDecl is the declaration of the optional fixture counting the
// effects of m, as a user adds it to a _test.go file.
func EffectFixtureDecl(m *Method) string { return names.EffectDecl(m.Receiver, m.Name) }

// ModelJSON prints the models of a run as -debug-model does, indented, with
// the file names and directories under dir made relative to it, so that a
// model can be kept beside a golden case and reviewed apart from the code
// printed from it.
func ModelJSON(pkgs []*Package, dir string) ([]byte, error) {
	b, err := json.MarshalIndent(pkgs, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("print the model: %w", err)
	}
	q, err := json.Marshal(dir + string(filepath.Separator))
	if err != nil {
		return nil, fmt.Errorf("print the model: %w", err)
	}
	prefix := strings.Trim(string(q), `"`)
	return append(bytes.ReplaceAll(b, []byte(prefix), nil), '\n'), nil
}
