// Package templates holds the text/template sources idemgen renders SQL
// migrations from, embedded so that the idemgen binary is self-contained.
//
// migration.sql.tmpl defines the comment block that opens every migration
// ("header") and the layout of its statements ("stmts"); each migration
// tool's file layout around them (names, section and no-transaction
// markers) is runtime/idem/ledger/migformat's. The SQL statements themselves are not written here:
// they come from the ledger schema in runtime/idem, the single definition of
// the ledger DDL, so the runtime's queries and the migrations cannot drift.
package templates

import "embed"

// FS holds the embedded migration templates (*.sql.tmpl).
//
//go:embed *.sql.tmpl
var FS embed.FS
