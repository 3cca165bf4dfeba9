// Package migformat describes the migration tools idemgen writes migrations
// for (goose, golang-migrate, tern, dbmate, Atlas and plain SQL run by psql),
// one Format value each: how a migration's files are named, where its up and
// down statements go and how they are marked, how a migration that must run
// outside a transaction says so, and how the tool reads a file back. The
// generator (gen/migrations) writes through it and the test harness
// (runtime/idemtest) reads through it, so the two cannot disagree about a
// marker. Like package ledger it imports only the standard library.
package migformat

import (
	"errors"
	"fmt"
	"strings"
)

// Default is the name of the format used when none is chosen.
const Default = "goose"

// DownSuffix ends the name of a down migration of a format that writes its
// down statements to a file of their own (DownFile).
const DownSuffix = ".down.sql"

// Names returns the names of the formats, the default first.
func Names() []string {
	all := formats()
	names := make([]string, len(all))
	for i, f := range all {
		names[i] = f.Name
	}
	return names
}

// Lookup returns the format called name.
func Lookup(name string) (Format, error) {
	for _, f := range formats() {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("unknown migration format %q: use one of %s", name, strings.Join(Names(), ", "))
}

// formats lists every format, the default first.
func formats() []Format {
	return []Format{goose(), golangMigrate(), tern(), dbmate(), atlas(), plain()}
}

// Down says where a format keeps a migration's down statements.
type Down int

const (
	// DownSection: in the same file as the up statements, after a marker
	// line (goose, tern, dbmate).
	DownSection Down = iota
	// DownFile: in a file of their own, NAME.down.sql beside NAME.up.sql
	// (golang-migrate, plain).
	DownFile
	// DownPlanned: nowhere; the tool plans a rollback itself (Atlas).
	DownPlanned
)

// Format is one migration tool's file layout: what the generator writes for
// it, and how the tool reads a file back. Formats come from Lookup; the zero
// Format is none, and its Files and Up fail.
type Format struct {
	// Name is the format's name, as -migration-format and
	// idemtest.Migrations spell it.
	Name string
	// Tool is the tool's name in prose: goose, Atlas, psql...
	Tool string
	// Width is the number of digits of a new migration's version number
	// (zero-padded).
	Width int
	// Down says where a migration's down statements go.
	Down Down
	// ToolTx reports whether the tool runs each migration in a transaction
	// of its own; without it, a file says BEGIN and COMMIT itself.
	ToolTx bool
	// Lone reports whether the tool runs a migration without a transaction
	// as a single statement, so that session settings must live in
	// migrations of their own around a CREATE INDEX CONCURRENTLY.
	Lone bool
	// Consecutive reports whether the tool numbers migrations 1, 2, 3, ...
	// without gaps.
	Consecutive bool
	// SumFile is the integrity file the tool keeps beside the migrations,
	// "" when it keeps none.
	SumFile string
	// Rollback starts the sentence that says how to roll back one
	// migration with the tool; what the down statements do completes it.
	// "{down}" in it stands for the name of the down file (DownFile).
	Rollback string
	// RollbackThree says how to roll back the last three migrations, the
	// subject of a sentence (Lone formats only).
	RollbackThree string

	block    [2]string              // lines around one statement the tool must not split, "" when none
	sections func(noTx bool) layout // where a single file's markers go
	up       func(src string) (Script, error)
}

// layout is where the markers of one migration file go.
type layout struct {
	directives []string // lines ending the header
	up, down   []string // marker lines opening the up and the down section
}

// Migration is one migration to lay out in a format's files.
type Migration struct {
	// Header is the comment block that opens the (up) file, ending with a
	// newline.
	Header string
	// DownHeader opens the down file of a DownFile format.
	DownHeader string
	// Up and Down are the up and down statements as written, each starting
	// on a new line.
	Up, Down string
	// NoTx marks a migration that must run outside a transaction.
	NoTx bool
}

// FileNames returns the names of the files of the migration whose name,
// without direction and extension, is base (such as 00001_create): the up
// file, and the down file ("" unless the format's Down is DownFile).
func (f Format) FileNames(base string) (up, down string) {
	if f.Down == DownFile {
		return base + ".up.sql", base + DownSuffix
	}
	return base + ".sql", ""
}

// UpSuffix ends the name of every up migration of the format.
func (f Format) UpSuffix() string {
	up, _ := f.FileNames("")
	return up
}

// Files lays m out in the format's files, named after base (see FileNames).
func (f Format) Files(base string, m Migration) (map[string][]byte, error) {
	if f.up == nil {
		return nil, errNone()
	}
	upName, downName := f.FileNames(base)
	if f.Down == DownFile {
		return map[string][]byte{upName: []byte(m.Header + m.Up), downName: []byte(m.DownHeader + m.Down)}, nil
	}
	l := f.sections(m.NoTx)
	var b strings.Builder
	b.WriteString(m.Header)
	for _, d := range l.directives {
		b.WriteString(d + "\n")
	}
	b.WriteString(section(l.up))
	b.WriteString(m.Up)
	if f.Down == DownSection {
		b.WriteString(section(l.down))
		b.WriteString(m.Down)
	}
	return map[string][]byte{upName: []byte(b.String())}, nil
}

// errNone is the error of a Format that did not come from Lookup.
func errNone() error {
	return errors.New("migformat: the zero Format is no format: get one from Lookup")
}

// section is the text that opens a section: a blank line, then its marker
// lines; nothing when it has none.
func section(markers []string) string {
	if len(markers) == 0 {
		return ""
	}
	return "\n" + strings.Join(markers, "\n") + "\n"
}

// Block encloses one statement the tool would otherwise cut at the ends of
// its lines (a DO block), in the tool's own markers.
func (f Format) Block(sql string) string {
	if f.block[0] == "" {
		return sql
	}
	return f.block[0] + "\n" + sql + "\n" + f.block[1]
}

// Statement is one SQL statement of a migration file and the line of the
// file it starts on.
type Statement struct {
	SQL  string
	Line int // 1-based
}

// Script is the part of a migration file that migrating up runs.
type Script struct {
	Statements []Statement
	// InTx reports whether the statements run in one transaction; without
	// it, each runs on its own (unless the file opens a transaction itself
	// with BEGIN).
	InTx bool
}

// Up returns the statements of a migration file that migrating up runs, and
// whether they run in one transaction, as the format's tool reads the file:
// down sections and marker lines are left out.
func (f Format) Up(src string) (Script, error) {
	if f.up == nil {
		return Script{}, errNone()
	}
	return f.up(src)
}
