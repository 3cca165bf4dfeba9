// Package annot reads what idemgen reads from source, for the analyzers:
// which methods carry a //go:generate idemgen directive, with which flags,
// and which files idemgen wrote. It mirrors the generator's own parsing
// (gen/internal/directive) for the few things the analyzers need.
package annot

import (
	"go/ast"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/gen/stamp"
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
		words, ok := split(line)
		if !ok {
			continue
		}
		if args, ok := idemgenArgs(words); ok {
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
	return c.Pos() < f.Package && c.Text == stamp.Header
}

// split splits a //go:generate line the way go generate does: words
// separated by spaces, double-quoted words unquoted.
func split(line string) ([]string, bool) {
	var words []string
	line = strings.TrimSpace(line)
	for line != "" {
		if line[0] == '"' {
			end := 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(line) {
				return nil, false
			}
			w, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, false
			}
			words = append(words, w)
			line = strings.TrimLeft(line[end+1:], " \t")
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		words = append(words, line[:i])
		line = strings.TrimLeft(line[i:], " \t")
	}
	return words, true
}

// idemgenArgs reports whether a go:generate command runs idemgen (idemgen,
// go tool idemgen, go run …/cmd/idemgen[@version]) and returns the words
// after the command.
func idemgenArgs(words []string) ([]string, bool) {
	isIdemgen := func(w string) bool {
		w, _, _ = strings.Cut(w, "@")
		return w == "idemgen" || strings.HasSuffix(w, "/idemgen")
	}
	switch {
	case len(words) >= 1 && isIdemgen(words[0]):
		return words[1:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "tool" && isIdemgen(words[2]):
		return words[3:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "run":
		for i := 2; i < len(words); i++ {
			if strings.HasPrefix(words[i], "-") {
				continue
			}
			if isIdemgen(words[i]) {
				return words[i+1:], true
			}
			return nil, false
		}
	}
	return nil, false
}
