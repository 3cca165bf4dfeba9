package directive

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
)

// Where says which kind of run takes a flag.
type Where int

const (
	// InDirective flags are written in a //go:generate directive only.
	InDirective Where = 1 << iota
	// InPackageRun flags are given to a package run (idemgen ./...).
	InPackageRun
	// Anywhere flags are taken by both.
	Anywhere = InDirective | InPackageRun
)

// Flag is one of idemgen's flags: the single place its name, its value's
// syntax, its help text, its default and its parser are written. The
// directive parser, the command's flag set, -h and the README's flag list
// (through cmd/idemgen/flags.txt, which a test holds equal to Help) all
// derive from FlagTable.
type Flag struct {
	Name  string // without the dash
	Value string // the value's syntax as -h shows it ("" for a boolean)
	Group string // the heading -h lists it under
	Help  string // what it does, one sentence or two
	// Default is what -h says applies when the flag is absent.
	Default string
	Where   Where
	// PerPackage flags are package-level settings: every directive that
	// sets one must agree.
	PerPackage bool
	// set stores a directive's value (nil: the directive only records it).
	set func(d *Directive, name, value string) error
}

// Boolean reports whether the flag takes no value (-v, -tests=false).
func (f Flag) Boolean() bool { return f.Value == "" || f.Value == "BOOL" }

// Groups are -h's headings, in order.
var groups = []string{
	"Mode (per method):",
	"Retention and locks (per method):",
	"Migrations (per package; every directive that sets one must agree):",
	"Tests:",
	"Loading and output:",
}

// FlagTable returns every flag idemgen takes, in the order -h lists them.
func FlagTable() []Flag {
	return []Flag{
		{Name: "mode", Value: "auto|atomic|external", Group: groups[0], Where: InDirective, Default: "auto", set: setMode,
			Help: "assert the mode the parameters decide: a pgx.Tx or *sql.Tx after ctx is atomic, none is external"},
		{Name: "inline", Value: "TABLE", Group: groups[0], Where: InDirective, Default: "none: the ledger", set: setNonEmpty(func(d *Directive) *string { return &d.Inline }, "the business table that holds the key, e.g. -inline=orders"),
			Help: "inline mode: the key, scope and fingerprint live in TABLE's rows, the method's own INSERT is the claim"},
		{Name: "lookup", Value: "METHOD", Group: groups[0], Where: InDirective, Default: "none; required with -inline", set: setNonEmpty(func(d *Directive) *string { return &d.Lookup }, "the method that reads a row by its key, e.g. -lookup=OrderByKey"),
			Help: "inline mode: the method that reads a row by its key"},
		{Name: "key", Value: "PARAM.FIELD", Group: groups[0], Where: InDirective, Default: "none", set: setNonEmpty(func(d *Directive) *string { return &d.Key }, "a parameter and a field path, e.g. -key=evt.EventID"),
			Help: "the request field holding the key when ctx has none"},
		{Name: "final-errors", Value: "ErrA,ErrB", Group: groups[0], Where: InDirective, Default: "none", set: setFinalErrors,
			Help: "package-level error variables stored and replayed"},
		{Name: "retention", Value: "DURATION", Group: groups[1], Where: InDirective, Default: "the store's, 24h", set: setDuration,
			Help: "how long a key is remembered"},
		{Name: "lock-timeout", Value: "DURATION", Group: groups[1], Where: InDirective, Default: "the store's, 1m", set: setDuration,
			Help: "external mode: how long a claim blocks retries"},
		{Name: "table", Value: "NAME", Group: groups[2], Where: InDirective, PerPackage: true, Default: "idempotency_keys",
			set:  func(d *Directive, _, v string) error { d.Table = v; return nil },
			Help: "ledger table"},
		{Name: "migrations", Value: "DIR", Group: groups[2], Where: InDirective, PerPackage: true, Default: DefaultMigrations,
			set:  setNonEmpty(func(d *Directive) *string { return &d.Migrations }, "a directory, relative to the package (default "+DefaultMigrations+")"),
			Help: "migrations directory, relative to the package"},
		{Name: "migration-format", Value: "FORMAT", Group: groups[2], Where: InDirective, PerPackage: true, Default: DefaultMigrationFormat, set: setFormat,
			Help: formatList()},
		{Name: "distributed", Value: "citus:TABLE.COLUMN", Group: groups[2], Where: InDirective, PerPackage: true, Default: "none", set: setDistributed,
			Help: "on Citus: distribute the ledger by scope, co-located with TABLE, distributed by COLUMN (docs/ha.md)"},
		{Name: "tests", Value: "BOOL", Group: groups[3], Where: InDirective, PerPackage: true, Default: "true; per package", set: setTests,
			Help: "generate the twin-request tests"},
		{Name: "storm", Value: "N", Group: groups[3], Where: InDirective, Default: strconv.Itoa(DefaultStorm) + "; per method", set: setStorm,
			Help: "concurrent requests in the generated storm test"},
		{Name: "tags", Value: "TAGS", Group: groups[4], Where: Anywhere, PerPackage: true, Default: "none; per package",
			set:  func(d *Directive, _, v string) error { d.Tags = v; return nil },
			Help: "build tags for loading the package; pass the same -tags to a package run"},
		{Name: "check", Group: groups[4], Where: InPackageRun, Default: "false",
			Help: "package runs: report stale or hand-edited output as a unified diff, exit 1 if any"},
		{Name: "v", Group: groups[4], Where: Anywhere, Default: "false",
			Help: "say what was written or skipped"},
		{Name: "q", Group: groups[4], Where: InPackageRun, Default: "false: one line per package written",
			Help: "print nothing on success"},
		{Name: "debug-model", Group: groups[4], Where: Anywhere, Default: "false",
			Help: "print the model built from the directives, write nothing"},
	}
}

// lookupFlag returns the flag a directive may carry under name.
func lookupFlag(name string) (Flag, bool) {
	for _, f := range FlagTable() {
		if f.Name == name && f.Where&InDirective != 0 {
			return f, true
		}
	}
	return Flag{}, false
}

// knownFlags lists the flags a directive may carry, as an error names them.
func knownFlags() string {
	var names []string
	for _, f := range FlagTable() {
		if f.Where&InDirective != 0 {
			names = append(names, "-"+f.Name)
		}
	}
	return strings.Join(names, ", ")
}

// helpColumn is where -h starts each flag's text; helpWidth is where it
// wraps (the tab before a flag counts as 8 columns).
const (
	helpColumn = 28
	helpWidth  = 108
)

// Help renders the flag table as -h prints it: the flags by group, each
// with its value's syntax, what it does and its default, wrapped.
func Help() string {
	var b strings.Builder
	table := FlagTable()
	for _, g := range groups {
		b.WriteString(g + "\n")
		for _, f := range table {
			if f.Group != g {
				continue
			}
			head := "-" + f.Name
			if f.Value != "" {
				head += "=" + f.Value
			}
			words := strings.Fields(f.Help + " (default " + f.Default + ")")
			line := fmt.Sprintf("%-*s", helpColumn, head)
			if len(head) >= helpColumn {
				line = head + " "
			}
			first := true
			for _, w := range words {
				if !first && 8+len(line)+1+len(w) > helpWidth {
					b.WriteString("\t" + line + "\n")
					line = strings.Repeat(" ", helpColumn) + w
					continue
				}
				if first {
					line += w
					first = false
				} else {
					line += " " + w
				}
			}
			b.WriteString("\t" + line + "\n")
		}
	}
	return b.String()
}

func setMode(d *Directive, _, value string) error {
	switch value {
	case "atomic", "external":
		d.Mode = value
	case "auto":
	default:
		return fmt.Errorf("-mode=%s: want auto, atomic or external", value)
	}
	return nil
}

func setDuration(d *Directive, name, value string) error {
	v, err := time.ParseDuration(value)
	if err != nil || v <= 0 {
		return fmt.Errorf("-%s=%s: want a positive duration such as 48h or 90s", name, value)
	}
	if name == "lock-timeout" {
		d.LockTimeout = v
		return nil
	}
	if v < time.Minute {
		return fmt.Errorf("-retention=%s: want at least 1m: a shorter window turns a client's retry into a new request", value)
	}
	d.Retention = v
	return nil
}

func setFinalErrors(d *Directive, _, value string) error {
	for _, n := range strings.Split(value, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return fmt.Errorf("-final-errors=%s: want a comma-separated list of package-level error variables, e.g. ErrCardDeclined,ErrInsufficientFunds", value)
		}
		if slices.Contains(d.FinalErrors, n) {
			return fmt.Errorf("-final-errors names %s twice", n)
		}
		d.FinalErrors = append(d.FinalErrors, n)
	}
	return nil
}

func setStorm(d *Directive, _, value string) error {
	n, err := strconv.Atoi(value)
	if err != nil || n < 2 || n > 1024 {
		return fmt.Errorf("-storm=%s: want a number of concurrent requests between 2 and 1024", value)
	}
	d.Storm = n
	return nil
}

func setFormat(d *Directive, _, value string) error {
	if !slices.Contains(migformat.Names(), value) {
		return fmt.Errorf("-migration-format=%s: want one of %s", value, strings.Join(migformat.Names(), ", "))
	}
	d.MigrationFormat = value
	return nil
}

// formatList names the migration formats as -h lists them: "a, b or c".
func formatList() string {
	f := migformat.Names()
	return strings.Join(f[:len(f)-1], ", ") + " or " + f[len(f)-1]
}

func setDistributed(d *Directive, _, value string) error {
	if _, err := ledger.ParseCitus(value); err != nil {
		return fmt.Errorf("-distributed=%w", err)
	}
	d.Distributed = value
	return nil
}

func setTests(d *Directive, _, value string) error {
	b, err := strconv.ParseBool(value)
	if err != nil {
		return fmt.Errorf("-tests=%s: want true or false", value)
	}
	d.Tests = b
	return nil
}

// setNonEmpty stores a value that must not be empty in the field field
// returns; the error says what the flag needs.
func setNonEmpty(field func(*Directive) *string, needs string) func(*Directive, string, string) error {
	return func(d *Directive, name, value string) error {
		if value == "" {
			return fmt.Errorf("-%s needs %s", name, needs)
		}
		*field(d) = value
		return nil
	}
}
