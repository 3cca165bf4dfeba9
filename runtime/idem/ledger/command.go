package ledger

import (
	"fmt"
	"strings"
)

// The ledger command's statements (idemledger: list, inspect, release,
// delete, stats) on the tables it finds. They read the database's clock
// (now()) alone: an operator's view is the server's.

// CommandStatements are the ledger command's statements on one ledger
// table.
type CommandStatements struct {
	// ListInProgress and ListExpired list the in-progress claims and the
	// expired keys, oldest first, each row with the total (a window count):
	// scope, method, key, created_at, expires_at, locked_until, fence,
	// total. $1 limit (at least one row is read, so the total comes back
	// with a limit of 0 too).
	ListInProgress, ListExpired string
	// Keys reads the rows under a scope ($1) and key ($2) whose method
	// matches $3 (its full name, or its end after a dot; an empty $3
	// matches every method), with the last mismatch (NULLs on a ledger without its
	// columns) and the database's now().
	Keys string
	// Release ends the lock of an in-progress row and Delete deletes a
	// row: $1 scope, $2 key, $3 method, $4 fence (and $5 status, Delete),
	// as shown, so a row that changed since is left as is. Neither touches
	// a row whose lock is live; ReleaseForce and DeleteForce do.
	Release, ReleaseForce, Delete, DeleteForce string
	// MethodStats counts the rows, in-progress rows and expired rows per
	// method.
	MethodStats string
}

// CommandStatements returns the ledger command's statements on the ledger
// table. mismatches says whether the table has the mismatch columns (a
// ledger migrated by an earlier idemgen lacks them).
func (l Schema) CommandStatements(mismatches bool) CommandStatements {
	q := l.Table.Quoted()
	const cols = `scope, method, key, created_at, expires_at, locked_until, fence, count(*) OVER ()`
	mismatch := "NULL::timestamptz, NULL::bytea"
	if mismatches {
		mismatch = "mismatch_at, mismatch_fingerprint"
	}
	const live = " AND (locked_until IS NULL OR locked_until <= now())"
	return CommandStatements{
		ListInProgress: fmt.Sprintf(`SELECT %s FROM %s WHERE status = 'in_progress' ORDER BY created_at LIMIT greatest($1, 1)`, cols, q),
		ListExpired: fmt.Sprintf(`SELECT %s FROM %s WHERE expires_at <= now() AND (locked_until IS NULL OR locked_until <= now())
ORDER BY expires_at LIMIT greatest($1, 1)`, cols, q),
		Keys: fmt.Sprintf(`SELECT scope, method, key, fingerprint, status, response, error_name, error_message,
       steps::text, fence, created_at, expires_at, locked_until, intention::text, %s, now()
FROM %s WHERE scope = $1 AND key = $2 AND %s ORDER BY method`, mismatch, q, methodMatches("$3")),
		Release:      fmt.Sprintf(releaseRow, q, live),
		ReleaseForce: fmt.Sprintf(releaseRow, q, ""),
		Delete:       fmt.Sprintf(deleteRow, q, live),
		DeleteForce:  fmt.Sprintf(deleteRow, q, ""),
		MethodStats: fmt.Sprintf(`SELECT method, count(*), count(*) FILTER (WHERE status = 'in_progress'),
       count(*) FILTER (WHERE expires_at <= now() AND (locked_until IS NULL OR locked_until <= now()))
FROM %s GROUP BY method ORDER BY method`, q),
	}
}

// releaseRow and deleteRow are the command's Release and Delete over the
// table (%[1]s) and the live lock's guard (%[2]s, or "").
const (
	releaseRow = `UPDATE %s SET locked_until = now() WHERE scope = $1 AND key = $2 AND method = $3 AND fence = $4 AND status = 'in_progress'%s`
	deleteRow  = `DELETE FROM %s WHERE scope = $1 AND key = $2 AND method = $3 AND fence = $4 AND status = $5%s`
)

// methodMatches is the SQL condition that the ledger's method column is
// the method named by the parameter p: its full name, or its end after a
// dot (Payments.Charge matches example.com/shop.Payments.Charge); an empty
// parameter matches every method.
func methodMatches(p string) string {
	return fmt.Sprintf("(%[1]s = '' OR method = %[1]s OR right(method, length(%[1]s) + 1) = '.' || %[1]s)", p)
}

// InlineCommandStatements are the ledger command's statements on one
// inline table.
type InlineCommandStatements struct {
	// ListExpired lists the keys whose retention ($2, µs) has ended,
	// oldest first, in the columns of CommandStatements.ListExpired (the
	// method '', no lock, fence 0). $1 limit.
	ListExpired string
	// Keys reads the row holding a scope ($1) and key ($2): scope, key,
	// fingerprint, claimed at, the database's now(), and the row's other
	// columns as JSON.
	Keys string
	// Delete takes the key off its row (the row stays): $1 scope, $2 key,
	// $3 fingerprint, as shown.
	Delete string
	// MethodStats counts the rows with a key ($2 names the table's one
	// method, as the command shows it) and those whose retention ($1, µs)
	// has ended.
	MethodStats string
}

// CommandStatements returns the ledger command's statements on the inline
// table.
func (s Inline) CommandStatements() InlineCommandStatements {
	q := s.Table.Quoted()
	key, scope := Quote(InlineKeyColumn), Quote(InlineScopeColumn)
	fp, at := Quote(InlineFingerprintColumn), Quote(InlineClaimedAtColumn)
	cols := []string{InlineKeyColumn, InlineScopeColumn, InlineFingerprintColumn, InlineClaimedAtColumn}
	set := make([]string, len(cols))
	for i, col := range cols {
		set[i] = Quote(col) + " = NULL"
	}
	return InlineCommandStatements{
		ListExpired: fmt.Sprintf(`SELECT %[2]s, '', %[3]s, %[4]s, %[4]s + $2::bigint * interval '1 microsecond', NULL::timestamptz, 0::bigint, count(*) OVER ()
FROM %[1]s WHERE %[3]s IS NOT NULL AND %[4]s + $2::bigint * interval '1 microsecond' <= now() ORDER BY %[4]s LIMIT greatest($1, 1)`, q, scope, key, at),
		Keys: fmt.Sprintf(`SELECT %[2]s, %[3]s, %[4]s, %[5]s, now(),
       to_jsonb(t) - ARRAY[%[6]s, %[7]s, %[8]s, %[9]s]
FROM %[1]s AS t WHERE %[2]s = $1 AND %[3]s = $2`, q, scope, key, fp, at,
			literal(InlineKeyColumn), literal(InlineScopeColumn), literal(InlineFingerprintColumn), literal(InlineClaimedAtColumn)),
		Delete: fmt.Sprintf(`UPDATE %s SET %s WHERE %s = $1 AND %s = $2 AND %s = $3`, q, strings.Join(set, ", "), scope, key, fp),
		MethodStats: fmt.Sprintf(`SELECT $2::text, count(*), 0::bigint, count(*) FILTER (WHERE %[3]s + $1::bigint * interval '1 microsecond' <= now())
FROM %[1]s WHERE %[2]s IS NOT NULL`, q, key, at),
	}
}

// FindTablesSQL lists the tables (schema, name) that have every column of
// $1, and whether each has every column of $4 too, sorted by schema and
// name: all tables, or, when $3 is not empty, the one named $3 ($2 its
// schema, or empty for the search path's).
const FindTablesSQL = `SELECT n.nspname, c.relname,
       (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($4)) = cardinality($4)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND ($3 = '' OR c.relname = $3 AND (n.nspname = $2 OR $2 = '' AND pg_table_is_visible(c.oid)))
  AND (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($1)) = cardinality($1)
ORDER BY n.nspname, c.relname`

// TableStatsSQL reads table $1's sizes (the table, its indexes, its key's
// index, named $2) and vacuum state from the statistics views.
const TableStatsSQL = `SELECT pg_table_size(c.oid), pg_indexes_size(c.oid),
       coalesce((SELECT pg_relation_size(i.oid) FROM pg_class i WHERE i.relname = $2 AND i.relnamespace = c.relnamespace), 0),
       coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), s.last_autovacuum, s.last_vacuum
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = $1::regclass`
