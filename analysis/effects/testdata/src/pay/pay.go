// Package pay holds annotated methods.
package pay

import (
	"bank"
	"context"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Payments charges cards.
type Payments struct {
	c     *http.Client
	other pgx.Tx
}

// OwnTx passes its transaction to a helper in another package.
//
//go:generate go tool idemgen
func (p *Payments) OwnTx(ctx context.Context, tx pgx.Tx) error { // want OwnTx:`reaches \(github.com/jackc/pgx/v5.Tx\).Exec \(unless its handle is the transaction\)`
	return bank.Save(ctx, tx)
}

// OtherTx passes a transaction it keeps in a field.
//
//go:generate go tool idemgen
func (p *Payments) OtherTx(ctx context.Context, tx pgx.Tx) error { // want `Payments.OtherTx runs in a transaction, but it calls \(github.com/jackc/pgx/v5.Tx\).Exec via bank.Save \(.*bank.go:14:16, called at .*pay.go:\d+:18\) through p.other, which is not derived` OtherTx:`reaches \(github.com/jackc/pgx/v5.Tx\).Exec`
	return bank.Save(ctx, p.other)
}

// Charge reaches the bank in another package.
//
//go:generate go tool idemgen
func (p *Payments) Charge(ctx context.Context, tx pgx.Tx) error { // want `Payments.Charge runs in a transaction, but it calls net/http.Post via bank.Transfer → bank.post \(.*bank.go:23:21, called at .*pay.go:40:22\)` Charge:"reaches net/http.Post"
	if err := tx.Exec(ctx, "INSERT INTO charges VALUES (1)"); err != nil {
		return err
	}
	return bank.Transfer()
}

// Direct calls net/http itself, in a closure.
//
//go:generate go tool idemgen
func (p *Payments) Direct(ctx context.Context, tx pgx.Tx) error { // want `Payments.Direct runs in a transaction, but it calls \(\*net/http.Client\).Get via Payments.Direct.func1` Direct:`reaches \(\*net/http.Client\).Get`
	f := func() error {
		_, err := p.c.Get("https://bank.example")
		return err
	}
	return f()
}

// Quiet logs, writes on its transaction and calls what is allowed.
//
//go:generate go tool idemgen
func (p *Payments) Quiet(ctx context.Context, tx pgx.Tx) error { // want Quiet:`reaches \(github.com/jackc/pgx/v5.Tx\).Exec \(unless its handle is the transaction\)`
	slog.InfoContext(ctx, "charged")
	if err := tx.Exec(ctx, "INSERT INTO charges VALUES (1)"); err != nil {
		return err
	}
	if err := bank.Audit(); err != nil {
		return err
	}
	return bank.Transfer() //idem:effect-ok the bank drops a repeated transfer id
}

// Refund is external: calling out is its mode.
//
//go:generate go tool idemgen
func (p *Payments) Refund(ctx context.Context) error { // want Refund:"reaches net/http.Post"
	return bank.Transfer()
}

// helper is not annotated.
func (p *Payments) helper() error { // want helper:"reaches net/http.Post"
	return bank.Transfer()
}
