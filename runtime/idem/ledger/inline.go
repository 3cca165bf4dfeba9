package ledger

import (
	"fmt"
	"strings"
)

// Inline-mode column names, added to the business table itself.
const (
	InlineKeyColumn         = "idempotency_key"
	InlineScopeColumn       = "idempotency_scope"
	InlineFingerprintColumn = "idempotency_fingerprint"
	InlineClaimedAtColumn   = "idempotency_claimed_at"
)

// Inline is the schema inline mode adds to a business table (orders,
// payments): the key, scope and fingerprint columns the method's own INSERT
// writes, a claimed-at column stamped by its default, and the partial unique
// index on (scope, key) that makes that INSERT the claim. It is the single
// definition of that DDL: the runtime's statements and the migration
// generator both derive from it.
type Inline struct {
	Table   Ident
	Columns []Column // all nullable: rows written without a key keep NULLs and are not indexed
}

// NewInline returns the inline-mode schema for the business table named table.
func NewInline(table string) (Inline, error) {
	id, err := ParseIdent(table)
	if err != nil {
		return Inline{}, err
	}
	return Inline{
		Table: id,
		Columns: []Column{
			{Name: InlineKeyColumn, Type: "text", Comment: "the client's idempotency key; NULL for rows written without one or whose key was swept"},
			{Name: InlineScopeColumn, Type: "text", Comment: "tenant the key belongs to; keys never cross scopes"},
			{Name: InlineFingerprintColumn, Type: "bytea", Comment: "SHA-256 of the canonical request; a reused key with another request is refused"},
			{Name: InlineClaimedAtColumn, Type: "timestamptz", Default: "now()", Comment: "when the key was written (by the column default); the retention window starts here"},
		},
	}, nil
}

// InlineIndexSuffix names the partial unique index: <table>_idempotency_key_idx.
const InlineIndexSuffix = "idempotency_key_idx"

// IndexName is the name of the partial unique index on (scope, key): a
// unique violation naming it means another row holds the key.
func (s Inline) IndexName() string { return s.Table.Derived(InlineIndexSuffix) }

// Index is the partial unique index on (scope, key) over the rows that carry
// a key: the index that makes the method's INSERT the claim.
func (s Inline) Index() Index {
	return Index{
		Suffix:  InlineIndexSuffix,
		Columns: []string{InlineScopeColumn, InlineKeyColumn},
		Unique:  true,
		Where:   Quote(InlineKeyColumn) + " IS NOT NULL",
		Comment: "makes the method's own INSERT the claim: a second row with the same (scope, key) is refused, so a retry finds the first row instead of writing another; rows without a key are not indexed",
	}
}

// AddColumnsSQL renders the ALTER TABLE statements that add the columns.
// Each column is added without a default (no table rewrite, no long lock)
// and only then given its default, which applies to new rows alone.
func (s Inline) AddColumnsSQL() []string {
	var out []string
	for _, c := range s.Columns {
		out = append(out, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s;", s.Table.Quoted(), Quote(c.Name), c.Type))
		if c.Default != "" {
			out = append(out, s.SetDefaultSQL(c))
		}
	}
	return out
}

// SetDefaultSQL renders the statement that gives column c its default.
func (s Inline) SetDefaultSQL(c Column) string {
	return fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s;", s.Table.Quoted(), Quote(c.Name), c.Default)
}

// CreateIndexSQL renders the partial unique index on (scope, key).
// concurrently selects CREATE UNIQUE INDEX CONCURRENTLY, for a table that
// already holds rows and takes writes.
func (s Inline) CreateIndexSQL(concurrently bool) string {
	return Schema{Table: s.Table}.CreateIndexSQL(s.Index(), concurrently)
}

// DropIndexSQL renders the statement that drops the index (a down migration).
func (s Inline) DropIndexSQL(concurrently bool) string {
	kw := "DROP INDEX"
	if concurrently {
		kw += " CONCURRENTLY"
	}
	return fmt.Sprintf("%s IF EXISTS %s;", kw, s.Table.QuotedDerived(InlineIndexSuffix))
}

// DropColumnsSQL renders the statement that drops the columns (a down migration).
func (s Inline) DropColumnsSQL() string {
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = "DROP COLUMN IF EXISTS " + Quote(c.Name)
	}
	return fmt.Sprintf("ALTER TABLE %s %s;", s.Table.Quoted(), strings.Join(parts, ", "))
}

// DDL returns the statements that add inline mode to an existing table, in
// order, for tests and for users who manage schema by hand. The index is
// built concurrently, so the last statement must run outside a transaction.
func (s Inline) DDL() []string {
	return append(s.AddColumnsSQL(), s.CreateIndexSQL(true))
}
