// Package directive is the only place idemgen's //go:generate directives are
// found and parsed: the flags of one directive, the directives of a
// package's files, and the package-level settings they must agree on.
package directive

import (
	"fmt"
	"go/token"
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
