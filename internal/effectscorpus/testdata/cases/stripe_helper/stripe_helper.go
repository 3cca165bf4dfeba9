// Package stripe_helper is a case of the effect corpus.
//
// Expect: refused
package stripe_helper

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/paymentintent"
)

// Svc is the service.
type Svc struct{}

func charge(amount int64) error {
	_, err := paymentintent.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(amount), Currency: stripe.String("eur")})
	return err
}

// Create charges a card with stripe-go through a helper.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id); err != nil {
		return err
	}
	return charge(id)
}
