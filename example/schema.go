package example

import "embed"

// Migrations holds the example's goose migrations: its own tables
// (00001_payments.sql) and the ledger migrations idemgen generated.
//
//go:embed migrations/*.sql
var Migrations embed.FS
