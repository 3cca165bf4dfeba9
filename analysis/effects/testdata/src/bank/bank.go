// Package bank posts to a bank: its functions export what they reach.
package bank

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Save writes on the transaction it is given: inside the caller's
// transaction when given it, outside when given another.
func Save(ctx context.Context, tx pgx.Tx) error { // want Save:`reaches \(github.com/jackc/pgx/v5.Tx\).Exec \(unless its handle is the transaction\)`
	return tx.Exec(ctx, "INSERT INTO ledger VALUES (1)")
}

// Transfer moves money.
func Transfer() error { // want Transfer:"reaches net/http.Post"
	return post()
}

func post() error { // want post:"reaches net/http.Post"
	_, err := http.Post("https://bank.example", "text/plain", nil)
	return err
}

// Audit is safe to repeat.
func Audit() error {
	_, err := http.Get("https://audit.example") //idem:effect-ok the audit service keeps the last state
	return err
}
