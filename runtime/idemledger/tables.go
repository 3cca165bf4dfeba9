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
		rows, err := db.Query(ctx, ledger.FindTablesSQL, mode.cols, onlyID.Schema, onlyID.Name, mismatchColumns)
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

// statements are the ledger command's statements on t, a ledger table.
func (t table) statements() ledger.CommandStatements {
	return ledger.Schema{Table: t.id}.CommandStatements(t.mismatches)
}

// inlineStatements are the ledger command's statements on t, an inline
// table.
func (t table) inlineStatements() ledger.InlineCommandStatements {
	return ledger.Inline{Table: t.id}.CommandStatements()
}
