package idem

import "github.com/idemgen/idemgen/runtime/idem/ledger"

// The ledger schema lives in package ledger, which has no database driver
// dependency; these names keep it reachable from idem.

// DefaultTable is the ledger table used when no other is configured.
const DefaultTable = ledger.DefaultTable

// Status values stored in the ledger's status column.
const (
	StatusInProgress = ledger.StatusInProgress // claimed, the work has not finished (external mode)
	StatusDone       = ledger.StatusDone       // the response (or final error) is stored
)

// Ledger is the ledger schema for one table (see package ledger).
type Ledger = ledger.Schema

// Ident is a validated, possibly schema-qualified SQL identifier.
type Ident = ledger.Ident

// Column is one ledger column.
type Column = ledger.Column

// Index is a secondary index on the ledger.
type Index = ledger.Index

// LedgerSchema returns the schema of the ledger table named table.
func LedgerSchema(table string) (Ledger, error) { return ledger.New(table) }

// ParseIdent validates a table name (see ledger.ParseIdent).
func ParseIdent(s string) (Ident, error) { return ledger.ParseIdent(s) }
