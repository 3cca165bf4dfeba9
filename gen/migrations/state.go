package migrations

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// stateVersion is the version of the machine-readable "-- idemgen:" line.
const stateVersion = "1"

// statePrefix starts the machine-readable line in each migration's header.
// It records what the migration creates, so that Plan can tell from the files
// alone which schema the directory already produces:
//
//	-- idemgen: v=1 format=goose table=idempotency_keys creates=table key=scope,method,key columns=... indexes=expires_at_idx storage=name:value,...
const statePrefix = "-- idemgen: "

// fileState is what one migration's state line says.
type fileState struct {
	format  string
	table   string
	creates bool // the migration creates the table
	key     []string
	columns []string
	indexes []string
	storage map[string]string // nil when the line says nothing about storage
	citus   string            // the migration distributes the table on Citus: citus:TABLE.COLUMN
}

func (f fileState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v=%s format=%s table=%s", stateVersion, f.format, f.table)
	if f.creates {
		b.WriteString(" creates=table")
	}
	if len(f.key) > 0 {
		b.WriteString(" key=" + strings.Join(f.key, ","))
	}
	if len(f.columns) > 0 {
		b.WriteString(" columns=" + strings.Join(f.columns, ","))
	}
	if len(f.indexes) > 0 {
		b.WriteString(" indexes=" + strings.Join(f.indexes, ","))
	}
	if f.storage != nil {
		names := slices.Sorted(maps.Keys(f.storage))
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + ":" + f.storage[n]
		}
		b.WriteString(" storage=" + strings.Join(parts, ","))
	}
	if f.citus != "" {
		b.WriteString(" distributed=" + f.citus)
	}
	return b.String()
}

func parseState(line string) (fileState, error) {
	var f fileState
	for _, field := range strings.Fields(line) {
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			return f, fmt.Errorf("field %q is not name=value", field)
		}
		list := func() []string {
			if value == "" {
				return nil
			}
			return strings.Split(value, ",")
		}
		switch name {
		case "v":
			if value != stateVersion {
				return f, fmt.Errorf("state version %q is not %s: the file was written by another version of idemgen", value, stateVersion)
			}
		case "format":
			f.format = value
		case "table":
			f.table = value
		case "creates":
			f.creates = value == "table"
		case "key":
			f.key = list()
		case "columns":
			f.columns = list()
		case "indexes":
			f.indexes = list()
		case "storage":
			f.storage = map[string]string{}
			for _, p := range list() {
				k, v, ok := strings.Cut(p, ":")
				if !ok {
					return f, fmt.Errorf("storage parameter %q is not name:value", p)
				}
				f.storage[k] = v
			}
		case "distributed":
			if _, err := ledger.ParseCitus(value); err != nil {
				return f, fmt.Errorf("distributed=%w", err)
			}
			f.citus = value
		default:
			return f, fmt.Errorf("unknown field %q: the file was written by another version of idemgen", name)
		}
	}
	if f.table == "" {
		return f, fmt.Errorf("no table= field")
	}
	if _, err := ledger.ParseIdent(f.table); err != nil {
		return f, err
	}
	return f, nil
}

// tableState is what the existing migrations create for one table.
type tableState struct {
	created bool
	key     []string
	columns map[string]bool
	indexes map[string]bool
	storage map[string]string
	citus   string // how an earlier migration distributed it, "" when none did
}

// dirState is what Plan learns from the existing directory.
type dirState struct {
	owned      map[string]bool        // idemgen's files
	format     string                 // format of idemgen's files, "" when none
	tables     map[string]*tableState // by unquoted table name
	created    []string               // tables with a creating migration, in file order
	maxVersion uint64                 // highest numeric version prefix of any file
	maxDigits  int                    // digits of that prefix as written
}

// width returns the zero-padded width of new version numbers: the format's,
// or more if the directory's highest version has more digits.
func (s dirState) width(format int) int { return max(format, s.maxDigits) }

// versionOf returns the numeric prefix of a migration file name such as
// 00012_name.sql, and its digit count.
func versionOf(name string) (uint64, int, bool) {
	i := 0
	for i < len(name) && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(name) || name[i] != '_' {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(name[:i], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return v, i, true
}

// isOwned reports whether b is a migration idemgen wrote.
func isOwned(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return string(bytes.TrimRight(line, "\r")) == GeneratedLine
}

func readState(format string, existing map[string][]byte) (dirState, error) {
	st := dirState{owned: map[string]bool{}, tables: map[string]*tableState{}}
	names := slices.Sorted(maps.Keys(existing))
	for _, name := range names {
		if v, digits, ok := versionOf(name); ok && v >= st.maxVersion {
			if v > st.maxVersion || digits > st.maxDigits {
				st.maxDigits = digits
			}
			st.maxVersion = v
		}
		b := existing[name]
		if !isOwned(b) {
			continue
		}
		st.owned[name] = true
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), statePrefix)
			if !ok {
				continue
			}
			fs, err := parseState(line)
			if err != nil {
				return st, fmt.Errorf("migrations: %s: %w", name, err)
			}
			if fs.format != "" {
				if st.format != "" && fs.format != st.format {
					return st, fmt.Errorf("migrations: %s is a %s migration but others are %s: keep one format per directory", name, fs.format, st.format)
				}
				st.format = fs.format
			}
			st.add(fs)
		}
		if err := sc.Err(); err != nil {
			return st, fmt.Errorf("migrations: read %s: %w", name, err)
		}
	}
	if st.format != "" && st.format != format {
		return st, fmt.Errorf("migrations: the directory holds idemgen migrations in the %s format, not %s; pass -migration-format=%s or use another directory", st.format, format, st.format)
	}
	return st, nil
}

func (st *dirState) add(fs fileState) {
	t := st.tables[fs.table]
	if t == nil {
		t = &tableState{columns: map[string]bool{}, indexes: map[string]bool{}}
		st.tables[fs.table] = t
	}
	if fs.creates && !t.created {
		t.created = true
		st.created = append(st.created, fs.table)
	}
	if len(fs.key) > 0 {
		t.key = fs.key
	}
	for _, c := range fs.columns {
		t.columns[c] = true
	}
	for _, ix := range fs.indexes {
		t.indexes[ix] = true
	}
	if fs.storage != nil {
		t.storage = fs.storage
	}
	if fs.citus != "" {
		t.citus = fs.citus
	}
}

// step is one schema change Plan turns into a migration.
type step struct {
	kind      string // create, alter, index or distribute
	columns   []ledger.Column
	storage   map[string]string // alter: the settings after the migration, nil if unchanged
	prevStore map[string]string // alter: the settings before it
	index     ledger.Index      // index
	oldTables []string          // create: tables earlier migrations created
}

// diff compares the schema the directory creates with the one cfg asks for.
func diff(cfg Config, l ledger.Schema, st dirState) ([]step, error) {
	name := l.Table.String()
	want := storageMap(l.Storage)
	t := st.tables[name]
	if t == nil || !t.created {
		var old []string
		for _, n := range st.created {
			if n != name {
				old = append(old, n)
			}
		}
		return []step{{kind: "create", oldTables: old}}, nil
	}
	if !slices.Equal(t.key, l.Key) {
		return nil, fmt.Errorf("migrations: table %s has primary key (%s) but this version of idemgen needs (%s); a new key cannot be swapped in safely on a live table: choose a new -table so a new ledger is created beside it",
			name, strings.Join(t.key, ", "), strings.Join(l.Key, ", "))
	}
	var steps []step
	var add []ledger.Column
	for _, c := range l.Columns {
		if t.columns[c.Name] {
			continue
		}
		if c.NotNull && c.Default == "" {
			return nil, fmt.Errorf("migrations: column %s.%s is NOT NULL without a default and cannot be added to a table that may hold rows", name, c.Name)
		}
		add = append(add, c)
	}
	var storage map[string]string
	if !maps.Equal(t.storage, want) {
		storage = want
	}
	if len(add) > 0 || storage != nil {
		steps = append(steps, step{kind: "alter", columns: add, storage: storage, prevStore: t.storage})
	}
	ixs := slices.Clone(l.Indexes)
	sort.Slice(ixs, func(i, j int) bool { return ixs[i].Suffix < ixs[j].Suffix })
	for _, ix := range ixs {
		if !t.indexes[ix.Suffix] {
			steps = append(steps, step{kind: "index", index: ix})
		}
	}
	switch {
	case t.citus == cfg.Distributed:
	case t.citus == "":
		steps = append(steps, step{kind: "distribute"})
	case cfg.Distributed == "":
		return nil, fmt.Errorf("migrations: table %s was distributed on Citus (distributed=%s) by an earlier migration, and idemgen writes no migration that undoes it: keep -distributed=%s, or run undistribute_table by hand and choose a new -table", name, t.citus, t.citus)
	default:
		return nil, fmt.Errorf("migrations: table %s was distributed on Citus as %s by an earlier migration, not %s; idemgen writes no migration that moves a distributed table: keep -distributed=%s, or re-co-locate by hand (update_distributed_table_colocation) and choose a new -table", name, t.citus, cfg.Distributed, t.citus)
	}
	return steps, nil
}

func storageMap(s [][2]string) map[string]string {
	m := make(map[string]string, len(s))
	for _, p := range s {
		m[p[0]] = p[1]
	}
	return m
}
