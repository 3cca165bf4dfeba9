// Package diag holds the generator's problems with positions in the user's
// source, printed compiler-style.
package diag

import (
	"fmt"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
)

// Error is a problem at a position in the user's source.
type Error struct {
	Pos token.Position
	Msg string
}

// Error prints the problem compiler-style: file:line:col: message.
func (e *Error) Error() string {
	if !e.Pos.IsValid() {
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
}

// ErrorList is every problem found in a run, sorted by position.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Relative returns a copy of l whose file names are relative to dir, as a
// compiler prints them, sorted by position and free of duplicates.
func (l ErrorList) Relative(dir string) ErrorList {
	out := make(ErrorList, 0, len(l))
	seen := map[string]bool{}
	for _, e := range l {
		c := *e
		if c.Pos.Filename != "" && dir != "" {
			if r, err := filepath.Rel(dir, c.Pos.Filename); err == nil {
				c.Pos.Filename = r
			}
		}
		if dir != "" {
			c.Msg = strings.ReplaceAll(c.Msg, dir+string(filepath.Separator), "")
		}
		if k := c.Error(); !seen[k] {
			seen[k] = true
			out = append(out, &c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}

// Errs collects errors while a package is checked.
type Errs struct{ List ErrorList }

// Add records a problem at pos.
func (e *Errs) Add(pos token.Position, format string, args ...any) {
	e.List = append(e.List, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}
