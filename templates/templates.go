// Package templates holds the text/template sources idemgen renders SQL
// migrations from, embedded so that the idemgen binary is self-contained.
//
// migration.sql.tmpl defines one template per output file layout (one per
// migration tool, see gen/migrations) and the shared "header" and "stmts"
// templates they use. The SQL statements themselves are not written here:
// they come from the ledger schema in runtime/idem, the single definition of
// the ledger DDL, so the runtime's queries and the migrations cannot drift.
package templates

import "embed"

// FS holds the embedded migration templates (*.sql.tmpl).
//
//go:embed *.sql.tmpl
var FS embed.FS
