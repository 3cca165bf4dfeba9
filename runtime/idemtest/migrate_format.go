package idemtest

import (
	"fmt"
	"regexp"
	"strings"
)

// txMode is how a migration file's statements run.
type txMode int

const (
	// inTx runs every statement of the file in one transaction.
	inTx txMode = iota
	// noTx runs each statement on its own, outside a transaction block
	// (unless the file opens one itself with BEGIN).
	noTx
)

// upScript is the part of a migration file that migrating up runs.
type upScript struct {
	stmts []statement
	mode  txMode
}

// parseUp returns the up statements of a migration file in format, and
// whether they run in one transaction, as the format's tool would.
func parseUp(format, src string) (upScript, error) {
	switch format {
	case "goose":
		return parseGoose(src)
	case "tern":
		return parseTern(src)
	case "dbmate":
		return parseDbmate(src)
	case "atlas":
		return parseAtlas(src)
	case "golang-migrate":
		return parseGolangMigrate(src)
	case "plain":
		stmts, err := splitStatements(src, 1)
		return upScript{stmts: stmts, mode: noTx}, err
	}
	return upScript{}, fmt.Errorf("unknown migration format %q", format)
}

// gooseAnnotation returns the annotation of a goose comment line such as
// "-- +goose Up", lower-cased with single spaces ("up", "no transaction").
func gooseAnnotation(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if len(rest) < len("+goose") || !strings.EqualFold(rest[:len("+goose")], "+goose") {
		return "", false
	}
	return strings.ToLower(strings.Join(strings.Fields(rest[len("+goose"):]), " ")), true
}

// parseGoose reads a goose file as goose does: only the lines after
// "-- +goose Up" and before "-- +goose Down" run; a statement ends at a line
// whose last word (before any -- comment) ends with a semicolon, except
// between "-- +goose StatementBegin" and "-- +goose StatementEnd", which
// enclose one statement; "-- +goose NO TRANSACTION" runs the statements
// outside a transaction.
func parseGoose(src string) (upScript, error) {
	var (
		up      upScript
		inUp    bool
		seenUp  bool
		inBlock bool
		buf     []string
		bufLine int
	)
	flush := func() {
		up.stmts = append(up.stmts, statement{SQL: strings.TrimRight(strings.Join(buf, "\n"), " \t\r\n"), Line: bufLine})
		buf = nil
	}
	lines := strings.Split(src, "\n")
	for n, line := range lines {
		lineNo := n + 1
		if a, ok := gooseAnnotation(line); ok {
			switch a {
			case "up":
				inUp, seenUp = true, true
			case "down":
				inUp = false
			case "no transaction":
				up.mode = noTx
			case "statementbegin":
				if inUp {
					if len(buf) > 0 {
						return upScript{}, fmt.Errorf("line %d: -- +goose StatementBegin inside a statement that started at line %d and does not end with ;", lineNo, bufLine)
					}
					inBlock, bufLine = true, lineNo+1
				}
			case "statementend":
				if inUp {
					if !inBlock {
						return upScript{}, fmt.Errorf("line %d: -- +goose StatementEnd without StatementBegin", lineNo)
					}
					flush()
					inBlock = false
				}
			default:
				return upScript{}, fmt.Errorf("line %d: annotation %q is not supported by idemtest", lineNo, strings.TrimSpace(line))
			}
			if !inUp && (inBlock || len(buf) > 0) {
				return upScript{}, fmt.Errorf("line %d: the statement that starts at line %d does not end with ; before -- +goose Down", lineNo, bufLine)
			}
			continue
		}
		if !inUp {
			continue
		}
		if !inBlock && len(buf) == 0 {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			bufLine = lineNo
		}
		buf = append(buf, line)
		if !inBlock && endsWithSemicolon(line) {
			flush()
		}
	}
	if !seenUp {
		return upScript{}, fmt.Errorf("no -- +goose Up annotation")
	}
	if inBlock || len(buf) > 0 {
		return upScript{}, fmt.Errorf("line %d: the statement that starts here does not end with ; (or its StatementBegin has no StatementEnd)", bufLine)
	}
	return up, checkGooseStatements(up)
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
func checkGooseStatements(up upScript) error {
	for _, s := range up.stmts {
		if _, err := splitStatements(s.SQL, s.Line); err != nil {
			return fmt.Errorf("%w: goose ends a statement at every line that ends with a semicolon; wrap a statement that holds such lines (a DO block, a function body) in -- +goose StatementBegin and -- +goose StatementEnd", err)
		}
	}
	return nil
}

// Tern's markers: the separator between the up and the down part, and the
// line that runs a part outside a transaction.
const (
	ternSeparator = "---- create above / drop below ----"
	ternDisableTx = "---- tern: disable-tx ----"
)

// parseTern reads a tern file: the up part is everything above the separator
// line; a disable-tx line in it runs it outside a transaction.
func parseTern(src string) (upScript, error) {
	up := src
	if i := indexLine(src, func(l string) bool { return strings.TrimSpace(l) == ternSeparator }); i >= 0 {
		up = src[:i]
	}
	if strings.Contains(up, "{{") {
		return upScript{}, fmt.Errorf("tern's template syntax ({{ ... }}) is not supported by idemtest")
	}
	mode := inTx
	if indexLine(up, func(l string) bool { return strings.TrimSpace(l) == ternDisableTx }) >= 0 {
		mode = noTx
	}
	stmts, err := splitStatements(up, 1)
	return upScript{stmts: stmts, mode: mode}, err
}

// Dbmate's section markers, with the options after them.
var (
	dbmateUp   = regexp.MustCompile(`(?m)^--\s*migrate:up(.*)$`)
	dbmateDown = regexp.MustCompile(`(?m)^--\s*migrate:down(.*)$`)
)

// parseDbmate reads a dbmate file: the up section runs from "-- migrate:up"
// to "-- migrate:down"; the option transaction:false runs it outside a
// transaction.
func parseDbmate(src string) (upScript, error) {
	loc := dbmateUp.FindStringSubmatchIndex(src)
	if loc == nil {
		return upScript{}, fmt.Errorf("no -- migrate:up section")
	}
	mode := inTx
	for _, opt := range strings.Fields(src[loc[2]:loc[3]]) {
		switch k, v, _ := strings.Cut(opt, ":"); {
		case k == "transaction" && v == "false":
			mode = noTx
		case k == "transaction" && v == "true":
		default:
			return upScript{}, fmt.Errorf("-- migrate:up option %q is not supported by idemtest", opt)
		}
	}
	body := src[loc[1]:]
	if d := dbmateDown.FindStringIndex(body); d != nil {
		body = body[:d[0]]
	}
	stmts, err := splitStatements(body, 1+strings.Count(src[:loc[1]], "\n"))
	return upScript{stmts: stmts, mode: mode}, err
}

// Atlas's directive lines.
var atlasDirective = regexp.MustCompile(`(?m)^--\s*atlas:(\w+)\s*(.*?)\s*$`)

// parseAtlas reads an atlas file: the whole file runs, in a transaction
// unless "-- atlas:txmode none" says otherwise.
func parseAtlas(src string) (upScript, error) {
	mode := inTx
	for _, m := range atlasDirective.FindAllStringSubmatch(src, -1) {
		switch {
		case m[1] == "txmode" && m[2] == "none":
			mode = noTx
		case m[1] == "txmode" && (m[2] == "file" || m[2] == "all"):
		case m[1] == "nolint":
		default:
			return upScript{}, fmt.Errorf("directive -- atlas:%s %s is not supported by idemtest", m[1], m[2])
		}
	}
	stmts, err := splitStatements(src, 1)
	return upScript{stmts: stmts, mode: mode}, err
}

// parseGolangMigrate reads a golang-migrate up file. golang-migrate sends
// the file as one query, which PostgreSQL runs as one implicit transaction
// unless the file says BEGIN and COMMIT itself; a file of one statement runs
// alone (CREATE INDEX CONCURRENTLY, say).
func parseGolangMigrate(src string) (upScript, error) {
	stmts, err := splitStatements(src, 1)
	if err != nil {
		return upScript{}, err
	}
	mode := inTx
	if len(stmts) <= 1 || hasTxControl(stmts) {
		mode = noTx
	}
	return upScript{stmts: stmts, mode: mode}, nil
}

// hasTxControl reports whether a statement opens or ends a transaction.
func hasTxControl(stmts []statement) bool {
	for _, s := range stmts {
		f := strings.Fields(strings.ToUpper(strings.TrimSuffix(s.SQL, ";")))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT":
			return true
		}
	}
	return false
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
