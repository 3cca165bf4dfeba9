package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The ledger's migration DDL beyond CREATE TABLE and CREATE INDEX
// (ledger.go) and the distribution (DistributeSQL): the comments, the
// columns and storage settings a later migration adds or changes, and what
// a down migration drops or undoes. The migration generator
// (gen/migrations) renders these into its files, around its own session
// settings and checks; the runtime never sends them.

// tableComment is the ledger table's comment (CommentsSQL).
const tableComment = "idempotency ledger written by idemgen: one row per (scope, method, key)"

// CommentsSQL renders the COMMENT statements on the table and on each of
// its columns that has a comment, one a line.
func (l Schema) CommentsSQL() string {
	comments := []string{fmt.Sprintf("COMMENT ON TABLE %s IS %s;", l.Table.Quoted(), literal(tableComment))}
	for _, c := range l.Columns {
		if c.Comment != "" {
			comments = append(comments, columnCommentSQL(l.Table, c))
		}
	}
	return strings.Join(comments, "\n")
}

// columnCommentSQL renders the COMMENT statement on column c of table id.
func columnCommentSQL(id Ident, c Column) string {
	return fmt.Sprintf("COMMENT ON COLUMN %s.%s IS %s;", id.Quoted(), Quote(c.Name), literal(c.Comment))
}

// DropTableSQL renders the statement that drops the ledger, with its rows
// (a down migration).
func (l Schema) DropTableSQL() string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s;", l.Table.Quoted())
}

// AddColumnSQL renders the statement that adds column c to a ledger an
// earlier migration created (its definition: Column.Def), and c's comment
// on the next line when it has one.
func (l Schema) AddColumnSQL(c Column) string {
	sql := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s;", l.Table.Quoted(), c.Def())
	if c.Comment != "" {
		sql += "\n" + columnCommentSQL(l.Table, c)
	}
	return sql
}

// DropColumnSQL renders the statement that drops column c, with its data
// (a down migration).
func (l Schema) DropColumnSQL(c Column) string { return dropColumnSQL(l.Table, c) }

// dropColumnSQL renders the statement that drops column c of table id.
func dropColumnSQL(id Ident, c Column) string {
	return fmt.Sprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s;", id.Quoted(), Quote(c.Name))
}

// SetStorageSQL renders the statement that sets the storage parameters
// params (name to value), in the order of their names.
func (l Schema) SetStorageSQL(params map[string]string) string {
	parts := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		parts = append(parts, k+" = "+params[k])
	}
	return fmt.Sprintf("ALTER TABLE %s SET (%s);", l.Table.Quoted(), strings.Join(parts, ", "))
}

// ResetStorageSQL renders the statement that resets the storage
// parameters names to their defaults.
func (l Schema) ResetStorageSQL(names []string) string {
	return fmt.Sprintf("ALTER TABLE %s RESET (%s);", l.Table.Quoted(), strings.Join(names, ", "))
}

// DropIndexSQL renders the statement that drops index ix (a down
// migration). concurrently selects DROP INDEX CONCURRENTLY, which does not
// block writes and runs outside a transaction.
func (l Schema) DropIndexSQL(ix Index, concurrently bool) string {
	kw := "DROP INDEX"
	if concurrently {
		kw += " CONCURRENTLY"
	}
	return fmt.Sprintf("%s IF EXISTS %s;", kw, l.Table.QuotedDerived(ix.Suffix))
}

// DistributeIfLocalSQL renders a DO block that distributes the ledger
// (DistributeSQL) unless Citus distributes it already (by hand, with
// create_distributed_table_concurrently), then removes the copied rows
// from the coordinator's local table, where Citus leaves them on disk.
func (l Schema) DistributeIfLocalSQL(c Citus) string {
	return fmt.Sprintf(`DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)) THEN
        PERFORM %s
        PERFORM truncate_local_data_after_distributing_table(%s);
    END IF;
END
$$;`, literal(l.Table.Quoted()), strings.TrimPrefix(l.DistributeSQL(c), "SELECT "), literal(l.Table.Quoted()))
}

// UndistributeSQL renders the statement that turns the distributed ledger
// back into a local table on the coordinator, rows included (a down
// migration).
func (l Schema) UndistributeSQL() string {
	return fmt.Sprintf("SELECT undistribute_table(%s);", literal(l.Table.Quoted()))
}

// AddColumnSQL renders the statement that adds inline column c to the
// business table (without its default: SetDefaultSQL), and c's comment on
// the next line when it has one.
func (s Inline) AddColumnSQL(c Column) string {
	sql := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s;", s.Table.Quoted(), Quote(c.Name), c.Type)
	if c.Comment != "" {
		sql += "\n" + columnCommentSQL(s.Table, c)
	}
	return sql
}

// DropColumnSQL renders the statement that drops inline column c, with
// its data (a down migration).
func (s Inline) DropColumnSQL(c Column) string { return dropColumnSQL(s.Table, c) }
