// Package ledger defines the idempotency ledger: its schema (the table,
// its columns, the primary key every claim relies on, its indexes and
// storage settings, and the columns and index inline mode adds to a
// business table) and the statements sent to it. It is the single
// definition of the ledger DDL, from which the runtime (runtime/idem), the
// test harness and the migration generator all derive, and the one owner
// of the statements sent to a ledger: the runtime's (Statements: per mode
// and per clock, the Citus forms beside the plain ones; InlineStatements;
// the key's lock, the standby's and Citus's statements) and the ledger
// command's (CommandStatements, InlineCommandStatements), whose text
// testdata/statements.golden pins. It imports nothing beyond the standard library, so the generator
// does not link a database driver.
package ledger

import (
	"fmt"
	"strings"
)

// DefaultTable is the ledger table used when no other is configured.
const DefaultTable = "idempotency_keys"

// Status values stored in the ledger's status column.
const (
	StatusInProgress = "in_progress" // claimed, the work has not finished (external mode)
	StatusDone       = "done"        // the response (or final error) is stored
)

// validIdentPart reports whether s matches [a-z_][a-z0-9_]{0,62}. (Not a
// regexp: compiling one at init costs every process that links this package,
// the generator included, about a millisecond.)
func validIdentPart(s string) bool {
	if len(s) == 0 || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Ident is a validated, possibly schema-qualified SQL identifier such as
// idempotency_keys or billing.idempotency_keys.
type Ident struct {
	Schema string // "" when unqualified
	Name   string
}

// ParseIdent validates a table name. Each part must be a lower-case SQL
// identifier of at most 63 bytes ([a-z_][a-z0-9_]*), so that it means the same
// thing quoted and unquoted and can never inject SQL.
func ParseIdent(s string) (Ident, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return Ident{}, fmt.Errorf("table name %q has more than one dot; use schema.table or table", s)
	}
	for _, p := range parts {
		if !validIdentPart(p) {
			return Ident{}, fmt.Errorf("table name %q is not a safe SQL identifier: each part must match [a-z_][a-z0-9_]* and be at most 63 bytes", s)
		}
	}
	if len(parts) == 2 {
		return Ident{Schema: parts[0], Name: parts[1]}, nil
	}
	return Ident{Name: parts[0]}, nil
}

// Quoted renders the identifier double-quoted, e.g. "billing"."idempotency_keys".
func (id Ident) Quoted() string {
	if id.Schema != "" {
		return Quote(id.Schema) + "." + Quote(id.Name)
	}
	return Quote(id.Name)
}

// String renders the identifier unquoted.
func (id Ident) String() string {
	if id.Schema != "" {
		return id.Schema + "." + id.Name
	}
	return id.Name
}

// Derived returns a sibling name (same schema) for an index or constraint,
// e.g. Derived("pkey") on idempotency_keys gives idempotency_keys_pkey.
func (id Ident) Derived(suffix string) string {
	n := id.Name + "_" + suffix
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// QuotedDerived renders Derived(suffix) double-quoted and qualified with the
// identifier's schema, the way DROP INDEX needs an index name.
func (id Ident) QuotedDerived(suffix string) string {
	if id.Schema != "" {
		return Quote(id.Schema) + "." + Quote(id.Derived(suffix))
	}
	return Quote(id.Derived(suffix))
}

// Quote renders one SQL identifier double-quoted.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Column is one ledger column.
type Column struct {
	Name    string
	Type    string // PostgreSQL type, e.g. "text", "timestamptz"
	NotNull bool
	Default string // SQL default expression, "" for none
	Comment string // why the column exists, written into migrations
}

// Def renders the column definition used in CREATE TABLE and ADD COLUMN.
func (c Column) Def() string {
	var b strings.Builder
	b.WriteString(Quote(c.Name) + " " + c.Type)
	if c.NotNull {
		b.WriteString(" NOT NULL")
	}
	if c.Default != "" {
		b.WriteString(" DEFAULT " + c.Default)
	}
	return b.String()
}

// Index is a secondary index on the ledger.
type Index struct {
	Suffix  string   // name suffix; the index is named <table>_<suffix>
	Columns []string // indexed columns, in order
	Unique  bool
	Where   string // SQL predicate of a partial index, "" for a full one
	Comment string // why the index exists
}

// Schema is the ledger schema for one table. It is the single definition of
// the ledger DDL: the runtime's queries, the test harness and the migration
// generator all derive from it.
type Schema struct {
	Table   Ident
	Columns []Column
	Key     []string // primary key columns: the unique index every claim relies on
	Indexes []Index
	// Storage holds per-table storage parameters (autovacuum settings that
	// suit a table where every row is inserted, updated once and deleted).
	Storage [][2]string
}

// New returns the schema of the ledger table named table.
func New(table string) (Schema, error) {
	id, err := ParseIdent(table)
	if err != nil {
		return Schema{}, err
	}
	s := Schema{
		Table: id,
		Columns: []Column{
			{Name: "scope", Type: "text", NotNull: true, Comment: "tenant the key belongs to; keys never cross scopes"},
			{Name: "method", Type: "text", NotNull: true, Comment: "the idempotent method, e.g. Payments.Charge"},
			{Name: "key", Type: "text", NotNull: true, Comment: "the client's idempotency key, kept raw for operators"},
			{Name: "fingerprint", Type: "bytea", NotNull: true, Comment: "SHA-256 of the canonical request; a reused key with another request is refused"},
			{Name: "status", Type: "text", NotNull: true, Comment: "in_progress or done"},
			{Name: "response", Type: "bytea", Comment: "the encoded response replayed to retries"},
			{Name: "error_name", Type: "text", Comment: "the final error's sentinel name, replayed so errors.Is holds"},
			{Name: "error_message", Type: "text", Comment: "the final error's message"},
			{Name: "steps", Type: "jsonb", NotNull: true, Default: "'{}'::jsonb", Comment: "recovery points of external work: completed steps and their results"},
			{Name: "fence", Type: "bigint", NotNull: true, Default: "1", Comment: "fencing token; bumped by every takeover so a stale attempt cannot finalise"},
			{Name: "created_at", Type: "timestamptz", NotNull: true, Default: "now()", Comment: "when the key was first claimed"},
			{Name: "expires_at", Type: "timestamptz", NotNull: true, Comment: "end of the retention window; a later request with the key is new"},
			{Name: "locked_until", Type: "timestamptz", Comment: "in-progress lock expiry (external mode); a retry after it takes over"},
			{Name: "intention", Type: "uuid", Comment: "the request the row records: kept by takeovers, new when the key is reused after its retention window; downstream keys and the fencing token derive from it"},
			{Name: "mismatch_at", Type: "timestamptz", Comment: "when a request with this key was last refused for another fingerprint (idem.ErrMismatch, HTTP 422); written by that refusal only"},
			{Name: "mismatch_fingerprint", Type: "bytea", Comment: "the fingerprint of the request last refused, for operators to set beside the stored one"},
		},
		Key: []string{"scope", "method", "key"},
		Indexes: []Index{
			{Suffix: "expires_at_idx", Columns: []string{"expires_at"}, Comment: "lets the sweeper find expired rows without scanning the table"},
		},
		Storage: [][2]string{
			{"autovacuum_vacuum_scale_factor", "0.01"},
			{"autovacuum_vacuum_insert_scale_factor", "0.01"},
			{"autovacuum_analyze_scale_factor", "0.02"},
		},
	}
	// Index names derive from the table name; PostgreSQL would truncate a
	// name past 63 bytes, and a truncated name can clash with another
	// object's or miss the IF NOT EXISTS check of a later migration.
	for _, suffix := range s.derivedSuffixes() {
		if n := id.Name + "_" + suffix; len(n) > maxIdentLen {
			return Schema{}, fmt.Errorf("table name %q is too long: the index name %s derived from it is %d bytes, over PostgreSQL's %d; use a table name of at most %d bytes",
				table, n, len(n), maxIdentLen, maxIdentLen-len(s.longestSuffix())-1)
		}
	}
	return s, nil
}

// maxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN-1).
const maxIdentLen = 63

// derivedSuffixes returns the suffixes of every name derived from the table's.
func (l Schema) derivedSuffixes() []string {
	out := []string{"pkey"}
	for _, ix := range l.Indexes {
		out = append(out, ix.Suffix)
	}
	return out
}

func (l Schema) longestSuffix() string {
	var long string
	for _, s := range l.derivedSuffixes() {
		if len(s) > len(long) {
			long = s
		}
	}
	return long
}

// PrimaryKeyName is the name of the unique index claims conflict on.
func (l Schema) PrimaryKeyName() string { return l.Table.Derived("pkey") }

// CreateTableSQL renders CREATE TABLE with the primary key (the unique index
// claims rely on) inline, so a new table is never without it.
func (l Schema) CreateTableSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n", l.Table.Quoted())
	for _, c := range l.Columns {
		fmt.Fprintf(&b, "    %s,\n", c.Def())
	}
	fmt.Fprintf(&b, "    CONSTRAINT %s PRIMARY KEY (%s)\n)", Quote(l.PrimaryKeyName()), quoteList(l.Key))
	if len(l.Storage) > 0 {
		b.WriteString(" WITH (")
		for i, p := range l.Storage {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p[0] + " = " + p[1])
		}
		b.WriteString(")")
	}
	b.WriteString(";")
	return b.String()
}

// CreateIndexSQL renders CREATE INDEX for ix. concurrently selects
// CREATE INDEX CONCURRENTLY, for a table that may already hold rows.
func (l Schema) CreateIndexSQL(ix Index, concurrently bool) string {
	kw := "INDEX"
	if ix.Unique {
		kw = "UNIQUE INDEX"
	}
	if concurrently {
		kw += " CONCURRENTLY"
	}
	where := ""
	if ix.Where != "" {
		where = " WHERE " + ix.Where
	}
	return fmt.Sprintf("CREATE %s IF NOT EXISTS %s ON %s (%s)%s;",
		kw, Quote(l.Table.Derived(ix.Suffix)), l.Table.Quoted(), quoteList(ix.Columns), where)
}

// DDL returns the statements that create the ledger in an empty database, in
// order, for tests and for users who manage schema by hand.
func (l Schema) DDL() []string {
	out := []string{l.CreateTableSQL()}
	for _, ix := range l.Indexes {
		out = append(out, l.CreateIndexSQL(ix, false))
	}
	return out
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = Quote(c)
	}
	return strings.Join(q, ", ")
}
