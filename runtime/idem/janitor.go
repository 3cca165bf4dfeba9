package idem

import (
	"context"
	"fmt"
	"time"
)

// StartJanitor checks its arguments, then runs Janitor in a new goroutine
// until ctx ends. An interval that is not positive is an error here, before
// anything starts, rather than a goroutine that silently returns at once.
// The returned channel is closed once the janitor has stopped.
func (s *Store) StartJanitor(ctx context.Context, interval time.Duration, batch int) (stopped <-chan struct{}, err error) {
	if interval <= 0 {
		return nil, fmt.Errorf("idem: StartJanitor: interval must be positive (got %s)", interval)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Janitor(ctx, interval, batch) // its only error is the interval, checked above
	}()
	return done, nil
}
