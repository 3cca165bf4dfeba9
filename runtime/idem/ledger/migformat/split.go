package migformat

import (
	"fmt"
	"strings"
)

// split splits src into statements at the semicolons that lie outside
// single-quoted strings (with E'...' backslash escapes), quoted identifiers,
// dollar-quoted strings ($$ and $tag$), line comments and (nested) block
// comments, and that are not inside parentheses or inside the BEGIN ... END
// of a SQL-standard function body (BEGIN ATOMIC), as psql does. Each
// statement keeps its semicolon; comments and blank lines between
// statements are dropped, and a last
// statement without a semicolon is kept. firstLine is the line of src's first
// byte in its file. Text that ends inside a quote or a comment is an error
// naming the line where the quote or comment starts.
func split(src string, firstLine int) ([]Statement, error) {
	var out []Statement
	start, startLine := -1, 0 // the current statement's first byte and line
	var nest nesting
	line := firstLine
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case strings.HasPrefix(src[i:], "--"):
			if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(src)
			}
			continue
		case strings.HasPrefix(src[i:], "/*"):
			j, err := skipBlockComment(src, i, line)
			if err != nil {
				return nil, err
			}
			line += strings.Count(src[i:j], "\n")
			i = j
			continue
		case c == ';' && !nest.open():
			if start >= 0 {
				out = append(out, Statement{SQL: src[start : i+1], Line: startLine})
				start, nest = -1, nesting{}
			}
			i++
			continue
		}
		if start < 0 {
			start, startLine = i, line
		}
		j, err := skipToken(src, i, line)
		if err != nil {
			return nil, err
		}
		nest.token(src[i:j])
		line += strings.Count(src[i:j], "\n")
		i = j
	}
	if start >= 0 {
		out = append(out, Statement{SQL: strings.TrimRight(src[start:], " \t\r\n"), Line: startLine})
	}
	return out, nil
}

// nesting follows a statement's parentheses and, in a statement that starts
// CREATE [OR REPLACE] FUNCTION or PROCEDURE, the BEGIN ... END blocks of a
// SQL-standard body (BEGIN ATOMIC), by psql's rule: outside parentheses,
// BEGIN opens a block, CASE opens one inside a block, END closes one.
type nesting struct {
	head   []string // the statement's first words, lower-cased, up to four
	parens int
	blocks int
}

// token takes the statement's next token.
func (n *nesting) token(tok string) {
	switch {
	case tok == "(":
		n.parens++
	case tok == ")":
		if n.parens > 0 {
			n.parens--
		}
	case isIdentStart(tok[0]):
		word := strings.ToLower(tok)
		if len(n.head) < 4 {
			n.head = append(n.head, word)
		}
		if !n.routine() || n.parens > 0 {
			return
		}
		switch {
		case word == "begin", word == "case" && n.blocks > 0:
			n.blocks++
		case word == "end" && n.blocks > 0:
			n.blocks--
		}
	}
}

// routine reports whether the statement starts CREATE [OR REPLACE]
// FUNCTION or PROCEDURE.
func (n *nesting) routine() bool {
	h := n.head
	isRoutine := func(w string) bool { return w == "function" || w == "procedure" }
	switch {
	case len(h) < 2 || h[0] != "create":
		return false
	case isRoutine(h[1]):
		return true
	}
	return len(h) >= 4 && h[1] == "or" && h[2] == "replace" && isRoutine(h[3])
}

// open reports whether a semicolon here lies inside parentheses or a block.
func (n nesting) open() bool { return n.parens > 0 || n.blocks > 0 }

// skipToken returns the end of the token at src[i], which is not white space,
// a comment or a semicolon: a quoted string or identifier, a dollar-quoted
// string, an identifier or keyword (with an E'...' string right after a lone E),
// or a single other byte.
func skipToken(src string, i, line int) (int, error) {
	c := src[i]
	switch {
	case c == '\'':
		return skipQuoted(src, i, '\'', false, line)
	case c == '"':
		return skipQuoted(src, i, '"', false, line)
	case c == '$':
		tag, ok := dollarTag(src, i)
		if !ok {
			return i + 1, nil // a parameter such as $1, or an operator
		}
		end := strings.Index(src[i+len(tag):], tag)
		if end < 0 {
			return 0, fmt.Errorf("line %d: dollar-quoted string %s is not closed", line, tag)
		}
		return i + len(tag) + end + len(tag), nil
	case isIdentStart(c):
		j := i + 1
		for j < len(src) && isIdentChar(src[j]) {
			j++
		}
		if j == i+1 && (c == 'E' || c == 'e') && j < len(src) && src[j] == '\'' {
			return skipQuoted(src, j, '\'', true, line)
		}
		return j, nil
	}
	return i + 1, nil
}

// skipQuoted returns the end of the string or identifier quoted by q that
// starts at src[i]. A doubled quote stands for itself; with backslashes, a
// backslash escapes the next byte (E'...' strings).
func skipQuoted(src string, i int, q byte, backslashes bool, line int) (int, error) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			if backslashes {
				j++
			}
		case q:
			if j+1 < len(src) && src[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	what := "string"
	if q == '"' {
		what = "quoted identifier"
	}
	return 0, fmt.Errorf("line %d: %s is not closed (a %c is missing)", line, what, q)
}

// skipBlockComment returns the end of the block comment starting at src[i].
// Block comments nest in PostgreSQL.
func skipBlockComment(src string, i, line int) (int, error) {
	depth := 0
	for j := i; j+1 < len(src); j++ {
		switch src[j : j+2] {
		case "/*":
			depth++
			j++
		case "*/":
			depth--
			j++
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("line %d: block comment is not closed (a */ is missing)", line)
}

// dollarTag returns the dollar-quote opener ($$ or $tag$) at src[i], if any.
// A $ right after an identifier never reaches here (skipToken consumes
// identifiers whole, $ included), so a$b is not a quote.
func dollarTag(src string, i int) (string, bool) {
	j := i + 1
	if j < len(src) && isIdentStart(src[j]) {
		for j < len(src) && isIdentChar(src[j]) && src[j] != '$' {
			j++
		}
	}
	if j < len(src) && src[j] == '$' {
		return src[i : j+1], true
	}
	return "", false
}

// isIdentStart reports whether c may start an unquoted identifier or keyword
// (bytes of multi-byte UTF-8 characters included).
func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// isIdentChar reports whether c may continue an unquoted identifier.
func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}
