package directive

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/token"
	"os"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/diag"
	"github.com/idemgen/idemgen/internal/gocommand"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Found is a directive located in the syntax, with the method it annotates.
type Found struct {
	D    *Directive
	Decl *ast.FuncDecl // nil when not attached to a method
}

// Find returns every idemgen directive in files, in source order, and adds
// the parse problems of each to e.
func Find(fset *token.FileSet, files []*ast.File, e *diag.Errs) []Found {
	var out []Found
	for _, f := range files {
		docOf := map[*ast.CommentGroup]*ast.FuncDecl{}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Doc != nil && fd.Recv != nil {
				docOf[fd.Doc] = fd
			}
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				line, ok := strings.CutPrefix(c.Text, "//go:generate ")
				if !ok {
					continue
				}
				pos := fset.Position(c.Slash)
				words, err := gocommand.Split(line)
				if err != nil {
					e.Add(pos, "cannot read the //go:generate line: %v", err)
					continue
				}
				args, ok := gocommand.IdemgenArgs(words)
				if !ok {
					continue
				}
				d, problems := Parse(args)
				d.Pos = pos
				for _, pr := range problems {
					e.Add(pos, "%s", pr)
				}
				fd := docOf[cg]
				if fd == nil {
					e.Add(pos, "this idemgen directive is not attached to a method: put it in the doc comment directly above the method to make idempotent, e.g. func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest) (Receipt, error)")
				}
				out = append(out, Found{D: d, Decl: fd})
			}
		}
	}
	return out
}

// Settings are the package-level values every directive must agree on.
type Settings struct {
	Table, Migrations, Format, Tags string
	Distributed                     string // citus:TABLE.COLUMN, "" for none
	DistributedAt                   token.Position
	Tests                           bool
}

// MergeSettings resolves the package-level flags. Two directives that set
// one differently are an error at both positions.
func MergeSettings(ds []*Directive, e *diag.Errs) Settings {
	s := Settings{Table: ledger.DefaultTable, Migrations: DefaultMigrations, Format: DefaultMigrationFormat, Tests: true}
	for _, f := range FlagTable() {
		if !f.PerPackage {
			continue
		}
		name := f.Name
		var first *Directive
		for _, d := range ds {
			if !d.IsSet(name) {
				continue
			}
			if first == nil {
				first = d
				continue
			}
			if d.set[name] != first.set[name] {
				e.Add(d.Pos, "-%s=%s disagrees with -%s=%s at %s: -%s applies to the whole package, so every directive that sets it must say the same", name, d.set[name], name, first.set[name], first.Pos, name)
				e.Add(first.Pos, "-%s=%s disagrees with -%s=%s at %s: -%s applies to the whole package, so every directive that sets it must say the same", name, first.set[name], name, d.set[name], d.Pos, name)
			}
		}
		if first == nil {
			continue
		}
		switch name {
		case "table":
			s.Table = first.Table
		case "migrations":
			s.Migrations = first.Migrations
		case "migration-format":
			s.Format = first.MigrationFormat
		case "distributed":
			s.Distributed, s.DistributedAt = first.Distributed, first.Pos
		case "tests":
			s.Tests = first.Tests
		case "tags":
			s.Tags = first.Tags
		}
	}
	return s
}

// InFile reports whether the Go file at path holds an idemgen directive,
// read without parsing: files the build constraints leave out are looked
// into too.
func InFile(path string) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "//go:generate ")
		if !ok {
			continue
		}
		if words, err := gocommand.Split(line); err == nil {
			if _, ok := gocommand.IdemgenArgs(words); ok {
				return true
			}
		}
	}
	return false
}
