// Package orms is Transfer (package transfers) written with bun and with
// GORM instead of sqlc: the same shape, (ctx, *sql.Tx, request), so idemgen
// treats it the same way. Each ORM runs its queries on the *sql.Tx it is
// given, and a caller already inside the ORM's own transaction passes the
// *sql.Tx underneath it to the generated TransferInTx:
//
//   - bun: query builders take the transaction as their connection,
//     .Conn(tx); a bun.Tx embeds *sql.Tx, so a caller passes tx.Tx.
//   - GORM: a session whose Statement.ConnPool is the transaction (what
//     gorm.DB.Begin itself does); inside db.Transaction a caller passes
//     tx.Statement.ConnPool.(*sql.Tx) (a *gorm.PreparedStmtTX with
//     PrepareStmt on: pass its Tx field).
//
// The main README shows these in a few lines each; this package keeps them
// compiling against the real libraries, and its tests run them through the
// runtime on a real PostgreSQL.
package orms
