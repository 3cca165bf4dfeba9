package migformat

import (
	"fmt"
	"strings"
)

// tern's marker lines: the separator between the up and the down part, and
// the line that runs a part outside a transaction.
const (
	ternSeparator = "---- create above / drop below ----"
	ternDisableTx = "---- tern: disable-tx ----"
)

// tern: one file, the up part above the separator line and the down part
// below it, numbered 1, 2, 3, ...; a part marked disable-tx runs outside a
// transaction.
func tern() Format {
	return Format{
		Name: "tern", Tool: "tern", Width: 3, Down: DownSection, ToolTx: true, Consecutive: true,
		Rollback: "tern migrate --destination -1 runs the section below the separator line, which ",
		sections: func(noTx bool) layout {
			l := layout{down: []string{ternSeparator}}
			if noTx {
				l.up = []string{ternDisableTx}
				l.down = append(l.down, ternDisableTx)
			}
			return l
		},
		up: parseTern,
	}
}

// parseTern reads a tern file: the up part is everything above the separator
// line; a disable-tx line in it runs it outside a transaction.
func parseTern(src string) (Script, error) {
	up := src
	if i := indexLine(src, func(l string) bool { return strings.TrimSpace(l) == ternSeparator }); i >= 0 {
		up = src[:i]
	}
	if strings.Contains(up, "{{") {
		return Script{}, fmt.Errorf("tern's template syntax ({{ ... }}) is not supported by idemtest")
	}
	inTx := indexLine(up, func(l string) bool { return strings.TrimSpace(l) == ternDisableTx }) < 0
	stmts, err := split(up, 1)
	return Script{Statements: stmts, InTx: inTx}, err
}

// indexLine returns the offset of the first line of src for which match
// holds, or -1.
func indexLine(src string, match func(string) bool) int {
	off := 0
	for _, l := range strings.SplitAfter(src, "\n") {
		if match(l) {
			return off
		}
		off += len(l)
	}
	return -1
}
