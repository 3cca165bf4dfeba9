package idem

import (
	"context"
	"errors"
	"time"
)

// DefaultSweepBatch is the number of rows one sweep transaction deletes.
const DefaultSweepBatch = 1000

// Sweep deletes ledger rows whose retention window has ended, in batches of
// batch rows (DefaultSweepBatch if batch <= 0). Each batch is one short
// statement, oldest rows first, that skips rows a live claim has locked, so
// cleanup never blocks traffic. It stops when a batch comes back short or
// ctx ends, and returns how many rows it deleted. A row is never deleted
// before its expires_at.
func (s *Store) Sweep(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultSweepBatch
	}
	var total int64
	for {
		start := time.Now()
		tag, err := s.pool.Exec(ctx, s.q.sweep, s.now(), batch)
		if err != nil {
			return total, storeErr("sweep", "delete expired rows", err)
		}
		n := tag.RowsAffected()
		total += n
		if n > 0 {
			s.hook(ctx, s.cfg.hooks.Swept, Event{Rows: n, Duration: time.Since(start)})
		}
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// Janitor runs Sweep every interval until ctx ends, logging failures, and
// returns nil when ctx ends. Run one per deployment (several are harmless:
// SKIP LOCKED keeps them out of each other's way).
func (s *Store) Janitor(ctx context.Context, interval time.Duration, batch int) error {
	if interval <= 0 {
		return errors.New("idem: Janitor: interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.Sweep(ctx, batch)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.cfg.logger.ErrorContext(ctx, "idempotency ledger sweep failed", "err", err, "deleted", n)
		case n > 0:
			s.cfg.logger.InfoContext(ctx, "idempotency ledger swept", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
