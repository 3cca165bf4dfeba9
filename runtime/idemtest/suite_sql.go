package idemtest

import (
	"database/sql"
)

// AtomicSQL is the suite of an atomic method that takes a *sql.Tx
// (database/sql); its Store must build the store from db.SQL
// (idem.NewSQLStore).
type AtomicSQL[S, W, A, R any] = AtomicTx[S, W, A, R, *sql.Tx]

// InlineSQL is the suite of an inline method that takes a *sql.Tx; its
// Store must build the store from db.SQL (idem.NewSQLStore).
type InlineSQL[S, W, A, R any] = InlineTx[S, W, A, R, *sql.Tx]
