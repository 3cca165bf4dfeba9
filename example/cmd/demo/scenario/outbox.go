package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/idemgen/idemgen/example/outbox"
	"github.com/idemgen/idemgen/runtime/idem"
)

// lostAfterSend is the email worker of step 6 whose first attempt dies
// after the email went out and before River recorded the job's
// completion: River retries the job.
type lostAfterSend struct {
	river.WorkerDefaults[outbox.ReceiptEmail]
	inner river.Worker[outbox.ReceiptEmail]
}

func (w lostAfterSend) Work(ctx context.Context, job *river.Job[outbox.ReceiptEmail]) error {
	if err := w.inner.Work(ctx, job); err != nil || job.Attempt > 1 {
		return err
	}
	return errors.New("worker lost after the send")
}

// soon retries a failed job a moment later, so the demo waits for no backoff.
type soon struct{}

func (soon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(100 * time.Millisecond) }

// outboxEmail is step 6: a charge whose receipt email goes through the
// outbox (examples/outbox). The charge's first response is lost and its
// retry replays; the email worker's first attempt dies after the send.
// One order, one email job, one email.
func (p *player) outboxEmail(ctx context.Context) error {
	p.printf("\n6. Outbox: a charge enqueues its receipt email as a River job in its own transaction; first response lost, email worker lost after the send\n")
	driver := riverpgxv5.New(p.env.Pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's tables: %w", err)
	}
	if _, err := p.env.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		customer text NOT NULL, email text NOT NULL, amount_cents bigint NOT NULL CHECK (amount_cents > 0))`); err != nil {
		return fmt.Errorf("create orders: %w", err)
	}
	store, err := idem.NewStore(p.env.Pool)
	if err != nil {
		return err
	}
	provider := outbox.NewFakeProvider()
	workers := river.NewWorkers()
	river.AddWorker(workers, lostAfterSend{inner: outbox.NewEmailWorker(outbox.NewIdempotentMailer(outbox.NewMailer(provider), store))})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown:     20 * time.Millisecond,
		RetryPolicy:       soon{},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return fmt.Errorf("River client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()

	shop := outbox.NewIdempotentShop(outbox.NewShop(client), store)
	req := outbox.ChargeRequest{Customer: p.res.Account, Email: "ada@example.com", AmountCents: 4200}
	kctx := idem.ContextWithScope(idem.ContextWithKey(ctx, newKey()), p.res.Account)
	first, err := shop.Charge(kctx, req)
	if err != nil {
		return fmt.Errorf("charge: %w", err)
	}
	p.printf("   attempt 1  Shop.Charge  → order %d, email job %d (response lost); retried with the same key\n", first.OrderID, first.EmailJob)
	rctx, outcome := idem.ContextWithOutcome(kctx)
	again, err := shop.Charge(rctx, req)
	if err != nil {
		return fmt.Errorf("charge retry: %w", err)
	}
	p.printf("   attempt 2  Shop.Charge  → order %d, email job %d (replayed: %t)\n", again.OrderID, again.EmailJob, outcome.Replayed())

	var state string
	var attempts int
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := p.env.Pool.QueryRow(ctx, `SELECT state::text, attempt FROM river_job WHERE id = $1`, first.EmailJob).Scan(&state, &attempts); err != nil {
			return fmt.Errorf("read the email job: %w", err)
		}
		if state == "completed" || state == "cancelled" || state == "discarded" || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	p.printf("   email job %d: %s after %d attempts (the first lost after the send)\n", first.EmailJob, state, attempts)
	orders, err := p.countRows(ctx, `SELECT count(*) FROM orders WHERE customer = $1`, p.res.Account)
	if err != nil {
		return err
	}
	jobs, err := p.countRows(ctx, `SELECT count(*) FROM river_job WHERE kind = 'receipt_email' AND (args->>'order_id')::bigint = $1`, first.OrderID)
	if err != nil {
		return err
	}
	sends, repeats := provider.Counts()
	return errors.Join(
		p.check(outcome.Replayed() && again == first, "the retry replayed the charge (same order, same email job)"),
		p.check(orders == 1 && jobs == 1, "%s and %s (want 1 and 1: the job committed with the charge)", count(orders, "order"), count(jobs, "email job")),
		p.check(state == "completed" && attempts == 2, "the email job completed on its retry (state %s, %d attempts; want completed, 2)", state, attempts),
		p.check(sends == 1 && repeats == 0, "%s to the provider (want 1: the retry read the recorded send)", count(sends, "send")),
	)
}
