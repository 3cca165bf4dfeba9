// Package directive is the only place idemgen's //go:generate directives are
// found and parsed: the flags of one directive, the directives of a
// package's files, and the package-level settings they must agree on.
package directive

import (
	"fmt"
	"go/token"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
)

// Directive is one parsed //go:generate idemgen line.
type Directive struct {
	Pos  token.Position
	Args []string // the flags as written

	Mode        string        // "", "atomic" or "external"
	Retention   time.Duration // 0: the store's default
	LockTimeout time.Duration // 0: the store's default
	FinalErrors []string
	Storm       int
	Inline      string // inline mode: the business table that holds the key
	Lookup      string // inline mode: the method that reads a row by its key
	Key         string // -key: the request field the key comes from, e.g. evt.EventID

	// Package-level settings: directives that set them must agree.
	Table           string
	Migrations      string
	MigrationFormat string
	Distributed     string // -distributed: citus:TABLE.COLUMN, "" for a single PostgreSQL
	Tests           bool
	Tags            string

	set map[string]string // flag name → value as written, for the flags given
}

// Defaults of the package-level settings.
const (
	DefaultMigrations      = "migrations"
	DefaultMigrationFormat = migformat.Default
	DefaultStorm           = 32
)

// Parse parses the flags of a directive (everything after the
// command). Unknown, repeated or malformed flags and positional arguments
// are errors.
func Parse(args []string) (*Directive, []string) {
	d := &Directive{Args: args, Tests: true, Storm: DefaultStorm, set: map[string]string{}}
	var problems []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			problems = append(problems, fmt.Sprintf("unexpected argument %q: a directive takes only flags, e.g. -retention=48h", a))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := lookupFlag(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown flag -%s (known: %s)", name, knownFlags()))
			continue
		}
		if !hasValue {
			if f.Boolean() {
				value = "true"
			} else if i+1 < len(args) {
				i++
				value = args[i]
			} else {
				problems = append(problems, fmt.Sprintf("flag -%s needs a value", name))
				continue
			}
		}
		if _, dup := d.set[name]; dup {
			problems = append(problems, fmt.Sprintf("flag -%s is given twice", name))
			continue
		}
		d.set[name] = value
		if f.set == nil {
			continue
		}
		if err := f.set(d, name, value); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if d.Retention > 0 && d.LockTimeout > d.Retention {
		problems = append(problems, fmt.Sprintf("-lock-timeout=%s is longer than -retention=%s: a call still holding its key would be treated as new when the window ends; make -retention at least the lock timeout",
			d.set["lock-timeout"], d.set["retention"]))
	}
	return d, problems
}

// IsSet reports whether the directive gave the flag.
func (d *Directive) IsSet(name string) bool { _, ok := d.set[name]; return ok }

// SplitCommand splits a //go:generate line the way go generate does: words
// separated by spaces, double-quoted words unquoted.
func SplitCommand(line string) ([]string, error) {
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
				return nil, fmt.Errorf("unterminated quoted string")
			}
			w, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, fmt.Errorf("bad quoted string %s", line[:end+1])
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
	return words, nil
}

// IdemgenArgs reports whether a go:generate command runs idemgen, in any of
// its forms, and returns the arguments after the command:
//
//	idemgen ARGS
//	go tool idemgen ARGS
//	go run github.com/idemgen/idemgen/cmd/idemgen[@version] ARGS
func IdemgenArgs(words []string) ([]string, bool) {
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
			if strings.HasPrefix(words[i], "-") { // go run's own flags
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
