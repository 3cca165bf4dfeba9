// Package annot reads what idemgen reads from source, for the analyzers:
// which methods carry a //go:generate idemgen directive, with which flags,
// and which files idemgen wrote. It reads the //go:generate line as the
// generator does (internal/gocommand), for the few things the analyzers
// need.
package annot

import (
	"go/ast"
	"strings"

	"github.com/idemgen/idemgen/internal/genheader"
	"github.com/idemgen/idemgen/internal/gocommand"
)

// Directive is the idemgen directive of one method.
type Directive struct {
	// Comment is the //go:generate comment.
	Comment *ast.Comment
	// Args are the words after the idemgen command.
	Args []string
}

// Inline returns the table of -inline=TABLE (or -inline TABLE), and
// whether the flag is given.
func (d *Directive) Inline() (string, bool) {
	for i, a := range d.Args {
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "inline" {
			continue
		}
		if hasVal {
			return val, true
		}
		if i+1 < len(d.Args) {
			return d.Args[i+1], true
		}
	}
	return "", false
}

// Of returns the idemgen directive in the doc comment of fd, or nil if it
// has none. Like the generator, it reads the comment list itself: the text
// of a comment group drops //go: directives.
func Of(fd *ast.FuncDecl) *Directive {
	if fd.Doc == nil || fd.Recv == nil {
		return nil
	}
	for _, c := range fd.Doc.List {
		line, ok := strings.CutPrefix(c.Text, "//go:generate ")
		if !ok {
			continue
		}
		words, err := gocommand.Split(line)
		if err != nil {
			continue
		}
		if args, ok := gocommand.IdemgenArgs(words); ok {
			return &Directive{Comment: c, Args: args}
		}
	}
	return nil
}

// Generated reports whether f is a file idemgen wrote: its first line is
// the generator's header.
func Generated(f *ast.File) bool {
	if len(f.Comments) == 0 || len(f.Comments[0].List) == 0 {
		return false
	}
	c := f.Comments[0].List[0]
	return c.Pos() < f.Package && c.Text == genheader.Header
}
