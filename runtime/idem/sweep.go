package idem

import (
	"context"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// DefaultSweepBatch is the number of rows one sweep transaction deletes.
const DefaultSweepBatch = 1000

// Sweep deletes ledger rows whose retention window has ended, in batches of
// batch rows (DefaultSweepBatch if batch <= 0). Each batch is one short
// statement, oldest rows first, that skips rows a live claim has locked, so
// cleanup never blocks traffic; between full batches it pauses, so that it
// spends only the store's sweep share of its time deleting
// (WithSweepShare). It stops when a batch comes back short or ctx ends, and
// returns how many rows it deleted. A row is never deleted before its
// expires_at.
//
// A ledger distributed on Citus is swept shard by shard, each in such
// batches, on the worker holding it, through the coordinator (citus.go).
func (s *Store) Sweep(ctx context.Context, batch int) (int64, error) {
	shards, err := s.citusShards(ctx, s.ledger.Table.Quoted())
	if err != nil {
		return 0, storeErr("sweep", "delete expired rows", err)
	}
	if len(shards) > 0 {
		return s.sweepShards(ctx, shards, batch, func(shard string, batch int) string {
			return ledger.ShardSweep(shard, s.nowLiteral(), batch)
		}, Event{}, "delete expired rows")
	}
	return s.sweepBatches(ctx, batch, func(batch int) (int64, error) {
		tag, err := s.exec.Exec(ctx, s.q.Sweep, s.at(batch)...)
		if err != nil {
			return 0, storeErr("sweep", "delete expired rows", err)
		}
		return tag.RowsAffected(), nil
	}, Event{})
}

// sweepBatches runs one batch after another until a batch comes back short,
// pacing them by the sweep share, and reports each non-empty batch to the
// Swept hook with ev's method.
func (s *Store) sweepBatches(ctx context.Context, batch int, one func(batch int) (int64, error), ev Event) (int64, error) {
	if batch <= 0 {
		batch = DefaultSweepBatch
	}
	var total int64
	for {
		start := time.Now()
		n, err := one(batch)
		if err != nil {
			return total, err
		}
		took := time.Since(start)
		total += n
		if n > 0 {
			ev.Rows, ev.Duration = n, took
			s.hook(ctx, s.cfg.hooks.Swept, ev)
		}
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		if err := s.pause(ctx, sweepPause(took, s.cfg.sweepShare)); err != nil {
			return total, err
		}
	}
}

// sweepPause is the pause after a batch that took took, so that deleting
// is share of the sweep's time.
func sweepPause(took time.Duration, share float64) time.Duration {
	return time.Duration(float64(took) * (1 - share) / share)
}

// SweepInline takes expired keys off m's table in batches of batch rows
// (DefaultSweepBatch if batch <= 0): their key, fingerprint and claimed-at
// columns become NULL, so the key is free again, and the rows themselves
// stay, with their scope (the row's tenant; on Citus the distribution
// column, which no statement may change). A table distributed on Citus is
// swept shard by shard, like the ledger (Sweep). Each batch is one short statement that skips rows a
// transaction holds, paced like Sweep (WithSweepShare). It stops when a
// batch comes back short or ctx ends, and returns how many rows it cleared.
func SweepInline[R any](ctx context.Context, s *Store, m *InlineMethod[R], batch int) (int64, error) {
	q, err := m.queries()
	if err != nil {
		return 0, err
	}
	shards, err := s.citusShards(ctx, q.schema.Table.Quoted())
	if err != nil {
		return 0, storeErr(m.Name, "clear expired keys", err)
	}
	if len(shards) > 0 {
		retention := strconv.FormatInt(micros(m.retention(s)), 10)
		return s.sweepShards(ctx, shards, batch, func(shard string, batch int) string {
			return ledger.InlineShardSweep(shard, s.nowLiteral(), retention, strconv.Itoa(batch))
		}, Event{Method: m.Name}, "clear expired keys")
	}
	return s.sweepBatches(ctx, batch, func(batch int) (int64, error) {
		tag, err := s.exec.Exec(ctx, q.Sweep, s.now(), micros(m.retention(s)), batch)
		if err != nil {
			return 0, storeErr(m.Name, "clear expired keys", err)
		}
		return tag.RowsAffected(), nil
	}, Event{Method: m.Name})
}
