package effectwalk

import (
	"go/ast"
	"go/token"
	"strings"
)

// OKDirective marks an effect as safe to repeat, with its reason:
// //idem:effect-ok audit log is idempotent by id.
const OKDirective = "//idem:effect-ok"

// okComment is one //idem:effect-ok comment.
type okComment struct {
	reason string
	pos    token.Position
}

// parseOK reads an //idem:effect-ok comment: its reason, and whether the
// comment is one.
func parseOK(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, OKDirective)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// okAt returns the //idem:effect-ok comment that covers a call at pos: on
// the call's line, or alone on the line above it. A comment without a
// reason covers nothing and is added to r's problems.
func (p *Program) okAt(pos token.Position, r *Report) (okComment, bool) {
	lines, ok := p.oks[pos.Filename]
	if !ok {
		lines = map[int]okComment{}
		if f := p.files[pos.Filename]; f != nil {
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					if reason, isOK := parseOK(c.Text); isOK {
						cp := p.fset.Position(c.Slash)
						lines[cp.Line] = okComment{reason: reason, pos: cp}
					}
				}
			}
		}
		p.oks[pos.Filename] = lines
	}
	for _, line := range []int{pos.Line, pos.Line - 1} {
		c, found := lines[line]
		if !found {
			continue
		}
		if c.reason == "" {
			addProblem(r, c.pos)
			continue
		}
		return c, true
	}
	return okComment{}, false
}

// docOK returns the reason of an //idem:effect-ok comment in a method's
// doc comment, which allows every effect the method reaches.
func (p *Program) docOK(decl *ast.FuncDecl, r *Report) (string, token.Position) {
	if decl == nil || decl.Doc == nil {
		return "", token.Position{}
	}
	for _, c := range decl.Doc.List {
		if reason, ok := parseOK(c.Text); ok {
			pos := p.fset.Position(c.Slash)
			if reason == "" {
				addProblem(r, pos)
				continue
			}
			return reason, pos
		}
	}
	return "", token.Position{}
}

func addProblem(r *Report, pos token.Position) {
	for _, pr := range r.Problems {
		if pr.Pos == pos {
			return
		}
	}
	r.Problems = append(r.Problems, Problem{Pos: pos, Msg: "//idem:effect-ok needs a reason after it, saying why repeating the call on a retry is safe (e.g. //idem:effect-ok the audit service drops duplicate ids)"})
}
