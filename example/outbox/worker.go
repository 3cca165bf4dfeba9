package outbox

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/idemgen/idemgen/runtime/idemriver"
)

// NewEmailWorker returns the receipt-email worker: it sends each
// ReceiptEmail job through mailer's generated wrapper, keyed by the job's
// EmailID (the wrapper's -key field, which the default Config lets win over
// the job's ID). Register it with river.AddWorker.
func NewEmailWorker(mailer *IdempotentMailer) river.Worker[ReceiptEmail] {
	return idemriver.External(idemriver.Config[ReceiptEmail]{}, func(ctx context.Context, job *river.Job[ReceiptEmail]) error {
		_, err := mailer.SendReceipt(ctx, job.Args)
		return err
	})
}
