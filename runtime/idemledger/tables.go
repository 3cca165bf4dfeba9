package idemledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// table is one table that holds idempotency keys.
type table struct {
	id     ledger.Ident
	inline bool
	// mismatches: the ledger records the last mismatch on a key (its
	// mismatch_at and mismatch_fingerprint columns, which a ledger
	// migrated by an earlier idemgen lacks).
	mismatches bool
}

// Name is the table's name, without the public schema.
func (t table) Name() string {
	if t.id.Schema == "public" {
		return t.id.Name
	}
	return t.id.String()
}

// Mode is "ledger" or "inline".
func (t table) Mode() string {
	if t.inline {
		return "inline"
	}
	return "ledger"
}

var (
	ledgerColumns = []string{"scope", "method", "key", "fingerprint", "status", "expires_at", "locked_until", "fence", "steps"}
	inlineColumns = []string{ledger.InlineKeyColumn, ledger.InlineScopeColumn, ledger.InlineFingerprintColumn, ledger.InlineClaimedAtColumn}
	// mismatchColumns record the last mismatch on a ledger's key.
	mismatchColumns = []string{"mismatch_at", "mismatch_fingerprint"}
)

// findTables returns the ledger tables, then the inline tables, each sorted
// by schema and name: the tables with all of the mode's columns. only, when set, keeps
// the one table it names (schema-qualified or on the search path). Tables
// whose names are not plain lower-case identifiers are not idemgen's and are
// left out.
func findTables(ctx context.Context, db *pgx.Conn, only string) ([]table, error) {
	var onlyID ledger.Ident
	if only != "" {
		id, err := ledger.ParseIdent(only)
		if err != nil {
			return nil, fail(ExitUsage, "-table: %v", err)
		}
		onlyID = id
	}
	var out []table
	for _, mode := range []struct {
		cols   []string
		inline bool
	}{{ledgerColumns, false}, {inlineColumns, true}} {
		rows, err := db.Query(ctx, `SELECT n.nspname, c.relname,
       (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($4)) = cardinality($4)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND ($3 = '' OR c.relname = $3 AND (n.nspname = $2 OR $2 = '' AND pg_table_is_visible(c.oid)))
  AND (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($1)) = cardinality($1)
ORDER BY n.nspname, c.relname`, mode.cols, onlyID.Schema, onlyID.Name, mismatchColumns)
		if err != nil {
			return nil, fmt.Errorf("find the tables: %w", err)
		}
		found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
			var schema, name string
			var mismatches bool
			err := r.Scan(&schema, &name, &mismatches)
			return table{id: ledger.Ident{Schema: schema, Name: name}, inline: mode.inline, mismatches: mismatches && !mode.inline}, err
		})
		if err != nil {
			return nil, fmt.Errorf("find the tables: %w", err)
		}
		for _, t := range found {
			if _, err := ledger.ParseIdent(t.id.String()); err == nil {
				out = append(out, t)
			}
		}
	}
	if only != "" && len(out) == 0 {
		return nil, fail(ExitError, "no table %s with a ledger's or inline mode's idempotency columns", only)
	}
	if len(out) == 0 {
		return nil, fail(ExitError, "no idempotency tables in this database: no table has a ledger's columns (%s) or inline mode's (%s); check -db",
			strings.Join(ledgerColumns, ", "), strings.Join(inlineColumns, ", "))
	}
	return out, nil
}

// methodMatches is the SQL condition that the ledger's method column is
// the method named by the parameter p: its full name, or its end after a
// dot (Payments.Charge matches example.com/shop.Payments.Charge); an empty
// parameter matches every method.
func methodMatches(p string) string {
	return fmt.Sprintf("(%[1]s = '' OR method = %[1]s OR right(method, length(%[1]s) + 1) = '.' || %[1]s)", p)
}
