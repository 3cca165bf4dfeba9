package outbox

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/idemgen/idemgen/runtime/idemriver"
)

// AddWorkers registers the receipt-email worker with workers: it sends
// each ReceiptEmail job through mailer's generated wrapper, keyed by the
// job's EmailID (the wrapper takes it from the request: -key).
func AddWorkers(workers *river.Workers, mailer *IdempotentMailer) {
	river.AddWorker(workers, idemriver.External(idemriver.Config[ReceiptEmail]{
		Key: func(*river.Job[ReceiptEmail]) string { return "" }, // -key=email.EmailID
	}, func(ctx context.Context, job *river.Job[ReceiptEmail]) error {
		_, err := mailer.SendReceipt(ctx, job.Args)
		return err
	}))
}
