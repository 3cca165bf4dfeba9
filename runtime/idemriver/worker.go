package idemriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Config says how a job maps to an idempotent call. The zero value keys a
// call by the request field of a wrapper generated with -key, else by the
// job's ID, and scopes it by the job's kind.
type Config[T river.JobArgs] struct {
	// Key returns the job's idempotency key; it wins over a wrapper's -key
	// field. nil puts JobIDKey in the context as a fallback
	// (idem.ContextWithFallbackKey): a wrapper generated with -key replaces
	// it with its request field, so two jobs inserted for one event share
	// the field's key and the second replays; a wrapper without -key is
	// keyed by the job's ID. Set Key to take the key from the job's
	// arguments for a wrapper without -key, when the producer may insert
	// the same work twice (a retried request, a message delivered twice).
	// An empty key leaves the context without one.
	Key func(job *river.Job[T]) string
	// Scope returns the scope the key belongs to (nil: KindScope).
	Scope func(job *river.Job[T]) string
	// Final reports the errors a retry could only repeat (the method's
	// -final-errors): the job is cancelled at once. A final error stored by
	// an earlier attempt comes back as an *idem.ReplayedError and cancels the
	// job whatever Final says. Nil: only replayed errors cancel.
	Final func(err error) bool
}

// JobIDKey keys a job by its ID: "river-job-" and the ID. Every retry of a
// job shares it; two jobs inserted for the same work do not.
func JobIDKey[T river.JobArgs](job *river.Job[T]) string {
	return "river-job-" + strconv.FormatInt(job.ID, 10)
}

// KindScope scopes a job's key by the job's kind: "river:" and the kind.
// The queue is left out, so moving a kind to another queue keeps its keys.
func KindScope[T river.JobArgs](job *river.Job[T]) string {
	return "river:" + job.Kind
}

// FinalErrors returns a Config.Final that holds for errors matching any
// of errs (errors.Is), e.g. FinalErrors(ErrCardDeclined, ErrInsufficientFunds).
func FinalErrors(errs ...error) func(error) bool {
	return func(err error) bool {
		for _, f := range errs {
			if errors.Is(err, f) {
				return true
			}
		}
		return false
	}
}

// context returns ctx carrying the job's scope and key: Key's (unless it
// returns ""), or with Key nil the job's ID as the fallback a wrapper's
// -key field replaces; marked a possible retry (idem.ContextWithRetry)
// from the job's second attempt on, so the call looks its key up before
// its body runs (it changes what the call costs, never what it answers).
func (c Config[T]) context(ctx context.Context, job *river.Job[T]) context.Context {
	scope := KindScope[T]
	if c.Scope != nil {
		scope = c.Scope
	}
	switch {
	case c.Key == nil:
		ctx = idem.ContextWithFallbackKey(ctx, JobIDKey(job))
	case c.Key(job) != "":
		ctx = idem.ContextWithKey(ctx, c.Key(job))
	}
	if job.Attempt > 1 {
		ctx = idem.ContextWithRetry(ctx)
	}
	return idem.ContextWithScope(ctx, scope(job))
}

// final reports whether err ends the job: a retry could only repeat it.
func (c Config[T]) final(err error) bool {
	var replayed *idem.ReplayedError
	return errors.As(err, &replayed) || c.Final != nil && c.Final(err)
}

// verdict turns the call's error into what Work returns to River.
func (c Config[T]) verdict(job *river.Job[T], err error) error {
	if err == nil {
		return nil
	}
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		return river.JobSnooze(inProgress.RetryAfter)
	case errors.Is(err, idem.ErrInProgress):
		return river.JobSnooze(time.Second)
	case errors.Is(err, idem.ErrMismatch), errors.Is(err, idem.ErrInvalidKey),
		errors.Is(err, idem.ErrNoKey), errors.Is(err, idem.ErrInvalidScope):
		return river.JobCancel(fmt.Errorf("idemriver: %s job %d cancelled, a retry would be refused the same way: %w", job.Kind, job.ID, err))
	case c.final(err):
		return river.JobCancel(fmt.Errorf("idemriver: %s job %d cancelled on a final error: %w", job.Kind, job.ID, err))
	}
	return fmt.Errorf("idemriver: %s job %d: %w", job.Kind, job.ID, err)
}

// Beginner begins pgx transactions: a *pgxpool.Pool, or a *pgx.Conn.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Atomic returns a worker for an atomic method taking a pgx.Tx, for a River
// client built on riverpgxv5 over the same database. Work begins a
// transaction on db and calls call with it; call must run the method
// through the generated wrapper's ...InTx method on that tx, e.g.
//
//	func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
//		_, err := payments.ChargeInTx(ctx, tx, job.Args.Request)
//		return err
//	}
//
// On success or replay the job is completed in the transaction
// (river.JobCompleteTx) before it commits. On a final error the transaction
// commits (it holds the stored error, which a retry would replay) and the
// job is cancelled; on any other error it rolls back.
func Atomic[T river.JobArgs](db Beginner, cfg Config[T], call func(ctx context.Context, tx pgx.Tx, job *river.Job[T]) error) river.Worker[T] {
	return &atomicWorker[T]{cfg: cfg, work: func(ctx context.Context, job *river.Job[T]) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		return finish(cfg, call(ctx, tx, job),
			func() error { _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); return err },
			func() error { return tx.Commit(ctx) })
	}}
}

// AtomicSQL is Atomic for a method taking a *sql.Tx, for a River client
// built on riverdatabasesql over the same database.
func AtomicSQL[T river.JobArgs](db *sql.DB, cfg Config[T], call func(ctx context.Context, tx *sql.Tx, job *river.Job[T]) error) river.Worker[T] {
	return &atomicWorker[T]{cfg: cfg, work: func(ctx context.Context, job *river.Job[T]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		return finish(cfg, call(ctx, tx, job),
			func() error { _, err := river.JobCompleteTx[*riverdatabasesql.Driver](ctx, tx, job); return err },
			tx.Commit)
	}}
}

// finish completes the job and commits after a successful call, commits
// after a final error, and leaves the transaction to roll back otherwise.
func finish[T river.JobArgs](cfg Config[T], err error, complete, commit func() error) error {
	switch {
	case err == nil:
		if err := complete(); err != nil {
			return fmt.Errorf("complete job in its transaction: %w", err)
		}
	case !cfg.final(err):
		return err
	}
	if cerr := commit(); cerr != nil {
		return fmt.Errorf("commit: %w", cerr)
	}
	return err
}

type atomicWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	cfg  Config[T]
	work func(ctx context.Context, job *river.Job[T]) error
}

// Work runs the job's call in a transaction that also completes the job.
func (w *atomicWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	return w.cfg.verdict(job, w.work(w.cfg.context(ctx, job), job))
}

// External returns a worker for an external-mode method: call runs the
// generated wrapper's method, e.g.
//
//	func(ctx context.Context, job *river.Job[EmailArgs]) error {
//		_, err := mailer.SendReceipt(ctx, job.Args.Receipt)
//		return err
//	}
//
// River completes the job when call returns nil (a replay included). A
// worker that dies mid-call leaves the key claimed: River's retry snoozes
// until the claim's lock times out, then takes it over and re-runs the
// method with the steps recorded so far.
func External[T river.JobArgs](cfg Config[T], call func(ctx context.Context, job *river.Job[T]) error) river.Worker[T] {
	return &externalWorker[T]{cfg: cfg, call: call}
}

type externalWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	cfg  Config[T]
	call func(ctx context.Context, job *river.Job[T]) error
}

// Work runs the job's call.
func (w *externalWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	return w.cfg.verdict(job, w.call(w.cfg.context(ctx, job), job))
}
