package idem

// Retrying a call whose attempt failed in a way another attempt can settle
// (the sentinels in errors.go), shared by Atomic and Inline.

import (
	"context"
	"errors"
	"fmt"
)

// retryAttempts runs attempt until it succeeds, fails for good, or the
// store's attempts run out: serialization failures, deadlocks, unknown
// COMMIT outcomes and rows that vanished are tried again after a backoff,
// and an expired inline key that was freed at once.
func retryAttempts[R any](ctx context.Context, s *Store, c call, attempt func() (R, error)) (R, error) {
	var zero R
	for n := 1; ; n++ {
		out, err := attempt()
		if err == nil || n >= s.cfg.maxAttempts ||
			!(retryable(err) || errors.Is(err, errCommitUnknown) || errors.Is(err, errRowVanished) || errors.Is(err, errKeyFreed)) {
			return out, err
		}
		s.cfg.logger.InfoContext(ctx, "idempotent transaction retried", "method", c.method, "key", c.key, "attempt", n, "err", err)
		if errors.Is(err, errKeyFreed) {
			continue // not contention: claim the freed key at once
		}
		if berr := s.backoff(ctx, n); berr != nil {
			return zero, fmt.Errorf("%w (not retried: %w)", err, berr)
		}
	}
}
