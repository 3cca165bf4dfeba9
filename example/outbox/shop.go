package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ErrInvalidRequest wraps every validation failure.
var ErrInvalidRequest = errors.New("invalid request")

// Inserter enqueues River jobs in a caller's transaction: a
// *river.Client[pgx.Tx] (an insert-only client, without workers, will do).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Shop takes orders and charges them.
type Shop struct {
	jobs Inserter
}

// NewShop returns a shop that enqueues its receipt emails with jobs.
func NewShop(jobs Inserter) *Shop { return &Shop{jobs: jobs} }

// ChargeRequest asks to charge a customer for an order.
type ChargeRequest struct {
	Customer    string `json:"customer"`
	Email       string `json:"email"`
	AmountCents int64  `json:"amount_cents"`
}

// Order is the result of a charge.
type Order struct {
	OrderID int64 `json:"order_id"`
	// EmailJob is the ID of the River job that sends the receipt.
	EmailJob int64 `json:"email_job"`
}

// Charge records the order and, in the same transaction, enqueues the
// receipt email (the outbox): a rolled-back charge enqueues nothing, a
// committed one always has its email job, and a replayed charge enqueues
// no second one.
//
//go:generate go tool idemgen -retention=48h
func (s *Shop) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest) (Order, error) {
	if req.Customer == "" || req.Email == "" || req.AmountCents <= 0 {
		return Order{}, fmt.Errorf("%w: customer, email and a positive amount_cents are required", ErrInvalidRequest)
	}
	var o Order
	err := tx.QueryRow(ctx, `INSERT INTO orders (customer, email, amount_cents) VALUES ($1, $2, $3) RETURNING id`,
		req.Customer, req.Email, req.AmountCents).Scan(&o.OrderID)
	if err != nil {
		return Order{}, fmt.Errorf("insert order: %w", err)
	}
	job, err := s.jobs.InsertTx(ctx, tx, ReceiptEmail{
		EmailID: "receipt-" + strconv.FormatInt(o.OrderID, 10), OrderID: o.OrderID, To: req.Email, AmountCents: req.AmountCents,
	}, nil)
	if err != nil {
		return Order{}, fmt.Errorf("enqueue receipt email: %w", err)
	}
	o.EmailJob = job.Job.ID
	return o, nil
}
