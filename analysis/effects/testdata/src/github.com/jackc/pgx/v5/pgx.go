// Package pgx is a stand-in for pgx's transaction, for the analyzer's tests.
package pgx

import "context"

// Tx is a transaction.
type Tx interface {
	Exec(ctx context.Context, sql string) error
}
