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
	return Schema{Table: s.Table}.DropIndexSQL(s.Index(), concurrently)
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

// InlineStatements are the statements the runtime sends to an inline
// table, besides the method's own (its INSERT is the claim, its lookup the
// replay).
type InlineStatements struct {
	// Check is sent with COMMIT: $1 scope, $2 key, $3 fingerprint. The
	// body must have written exactly one row with its key and fingerprint;
	// any other count divides by zero, which aborts the transaction, so
	// the COMMIT rolls back.
	Check string
	// Free runs after a refused claim: a key whose window has ended is
	// taken off its old row (the row stays) so the request runs as new.
	// $1 scope, $2 key, $3 retention µs, by the database's clock; FreeAt
	// is the same by the store's ($1 now, then $2 scope, $3 key, $4
	// retention µs). The window's end is computed from the clock alone,
	// never from a column, and the clock is now() or a parameter, not a
	// choice between them: Citus routes such an UPDATE to the key's
	// shard, and refuses a stable function of a column or a COALESCE with
	// now().
	Free, FreeAt string
	// Sweep takes expired keys off one batch of rows: $1 now (NULL: the
	// database's), $2 retention µs, $3 batch (InlineShardSweep).
	Sweep string
}

// Statements returns the runtime's statements on the inline table.
func (s Inline) Statements() InlineStatements {
	const now = "coalesce($1::timestamptz, now())"
	t := s.Table.Quoted()
	key, scope := Quote(InlineKeyColumn), Quote(InlineScopeColumn)
	fp, at := Quote(InlineFingerprintColumn), Quote(InlineClaimedAtColumn)
	clear := inlineClear()
	return InlineStatements{
		Check: fmt.Sprintf(`SELECT 1 / (count(*) = 1)::int FROM %s WHERE %s = $1 AND %s = $2 AND %s = $3`, t, scope, key, fp),
		Free: fmt.Sprintf(`UPDATE %[1]s SET %[2]s
WHERE %[3]s = $1 AND %[4]s = $2 AND %[5]s <= now() - $3::bigint * interval '1 microsecond'`, t, clear, scope, key, at),
		FreeAt: fmt.Sprintf(`UPDATE %[1]s SET %[2]s
WHERE %[3]s = $2 AND %[4]s = $3 AND %[5]s <= $1::timestamptz - $4::bigint * interval '1 microsecond'`, t, clear, scope, key, at),
		Sweep: InlineShardSweep(t, now, "$2::bigint", "$3"),
	}
}

// inlineClear frees a row's key and keeps its scope: the scope is the
// row's tenant, and on Citus the distribution column, which no statement
// may change (a NULL key is neither indexed nor found).
func inlineClear() string {
	return fmt.Sprintf("%s = NULL, %s = NULL, %s = NULL",
		Quote(InlineKeyColumn), Quote(InlineFingerprintColumn), Quote(InlineClaimedAtColumn))
}

// InlineShardSweep renders the inline sweep on table t (the table, quoted,
// or one of its shards, as Citus names it): one batch of rows whose key
// has expired loses the key; rows a transaction holds are skipped, so
// cleanup never waits. now, retention (µs) and batch are SQL expressions:
// parameters (InlineStatements.Sweep), or literals where the statement
// goes without parameters (a shard's).
func InlineShardSweep(t, now, retention, batch string) string {
	key, scope := Quote(InlineKeyColumn), Quote(InlineScopeColumn)
	return fmt.Sprintf(`WITH batch AS MATERIALIZED (
    SELECT %[3]s AS scope, %[4]s AS key FROM %[1]s
    WHERE %[4]s IS NOT NULL AND %[5]s + %[7]s * interval '1 microsecond' <= %[6]s
    LIMIT %[8]s FOR UPDATE SKIP LOCKED)
UPDATE %[1]s AS t SET %[2]s FROM batch
WHERE t.%[4]s IS NOT NULL AND t.%[3]s = batch.scope AND t.%[4]s = batch.key`, t, inlineClear(), scope, key, Quote(InlineClaimedAtColumn), now, retention, batch)
}
