package migformat

import (
	"fmt"
	"strings"
)

// goose's annotations: comment lines "-- +goose ANNOTATION", read in any
// case and spacing.
const (
	gooseMark  = "+goose"
	gooseUp    = "Up"
	gooseDown  = "Down"
	gooseNoTx  = "NO TRANSACTION"
	gooseBegin = "StatementBegin"
	gooseEnd   = "StatementEnd"
)

// gooseLine is the comment line that carries a goose annotation.
func gooseLine(annotation string) string { return "-- " + gooseMark + " " + annotation }

// goose: one file, an Up and a Down section, each migration in a
// transaction unless NO TRANSACTION says otherwise.
func goose() Format {
	return Format{
		Name: "goose", Tool: "goose", Width: 5, Down: DownSection, ToolTx: true,
		Rollback: "goose down runs the Down section below, which ",
		block:    [2]string{gooseLine(gooseBegin), gooseLine(gooseEnd)},
		sections: func(noTx bool) layout {
			l := layout{up: []string{gooseLine(gooseUp)}, down: []string{gooseLine(gooseDown)}}
			if noTx {
				l.up = append([]string{gooseLine(gooseNoTx)}, l.up...)
			}
			return l
		},
		up: parseGoose,
	}
}

// gooseAnnotation returns the annotation of a goose comment line such as
// "-- +goose Up", lower-cased with single spaces ("up", "no transaction").
func gooseAnnotation(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if len(rest) < len(gooseMark) || !strings.EqualFold(rest[:len(gooseMark)], gooseMark) {
		return "", false
	}
	return fold(rest[len(gooseMark):]), true
}

// fold lower-cases s and reduces its spacing to single spaces.
func fold(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// gooseReader reads a goose file line by line.
type gooseReader struct {
	up      Script
	inUp    bool
	seenUp  bool
	inBlock bool
	buf     []string
	bufLine int
}

// flush ends the statement in buf.
func (g *gooseReader) flush() {
	g.up.Statements = append(g.up.Statements, Statement{SQL: strings.TrimRight(strings.Join(g.buf, "\n"), " \t\r\n"), Line: g.bufLine})
	g.buf = nil
}

// parseGoose reads a goose file as goose does: only the lines after
// "-- +goose Up" and before "-- +goose Down" run; a statement ends at a line
// whose last word (before any -- comment) ends with a semicolon, except
// between "-- +goose StatementBegin" and "-- +goose StatementEnd", which
// enclose one statement; "-- +goose NO TRANSACTION" runs the statements
// outside a transaction.
func parseGoose(src string) (Script, error) {
	g := gooseReader{up: Script{InTx: true}}
	for n, line := range strings.Split(src, "\n") {
		if err := g.line(n+1, line); err != nil {
			return Script{}, err
		}
	}
	if !g.seenUp {
		return Script{}, fmt.Errorf("no %s annotation", gooseLine(gooseUp))
	}
	if g.inBlock || len(g.buf) > 0 {
		return Script{}, fmt.Errorf("line %d: the statement that starts here does not end with ; (or its StatementBegin has no StatementEnd)", g.bufLine)
	}
	return g.up, checkGooseStatements(g.up)
}

// line reads line lineNo of the file.
func (g *gooseReader) line(lineNo int, line string) error {
	if a, ok := gooseAnnotation(line); ok {
		return g.annotation(lineNo, line, a)
	}
	if !g.inUp {
		return nil
	}
	if !g.inBlock && len(g.buf) == 0 {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			return nil
		}
		g.bufLine = lineNo
	}
	g.buf = append(g.buf, line)
	if !g.inBlock && endsWithSemicolon(line) {
		g.flush()
	}
	return nil
}

// annotation reads the annotation a of line lineNo.
func (g *gooseReader) annotation(lineNo int, line, a string) error {
	switch a {
	case fold(gooseUp):
		g.inUp, g.seenUp = true, true
	case fold(gooseDown):
		g.inUp = false
	case fold(gooseNoTx):
		g.up.InTx = false
	case fold(gooseBegin):
		if g.inUp {
			if len(g.buf) > 0 {
				return fmt.Errorf("line %d: %s inside a statement that started at line %d and does not end with ;", lineNo, gooseLine(gooseBegin), g.bufLine)
			}
			g.inBlock, g.bufLine = true, lineNo+1
		}
	case fold(gooseEnd):
		if g.inUp {
			if !g.inBlock {
				return fmt.Errorf("line %d: %s without %s", lineNo, gooseLine(gooseEnd), gooseBegin)
			}
			g.flush()
			g.inBlock = false
		}
	default:
		return fmt.Errorf("line %d: annotation %q is not supported by idemtest", lineNo, strings.TrimSpace(line))
	}
	if !g.inUp && (g.inBlock || len(g.buf) > 0) {
		return fmt.Errorf("line %d: the statement that starts at line %d does not end with ; before %s", lineNo, g.bufLine, gooseLine(gooseDown))
	}
	return nil
}

// endsWithSemicolon reports whether goose ends a statement at line: its last
// word before a word starting with -- ends with a semicolon.
func endsWithSemicolon(line string) bool {
	prev := ""
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "--") {
			break
		}
		prev = w
	}
	return strings.HasSuffix(prev, ";")
}

// checkGooseStatements reports a statement that goose cut inside a quote (a
// DO block whose body has a line ending with a semicolon, say): the server
// would reject it with a less helpful message.
func checkGooseStatements(up Script) error {
	for _, s := range up.Statements {
		if _, err := split(s.SQL, s.Line); err != nil {
			return fmt.Errorf("%w: goose ends a statement at every line that ends with a semicolon; wrap a statement that holds such lines (a DO block, a function body) in %s and %s", err, gooseLine(gooseBegin), gooseLine(gooseEnd))
		}
	}
	return nil
}
