package idem

import (
	"context"
	"testing"
	"time"
)

// The delay before a late attempt is capped, however many attempts are
// allowed: the doubling never overflows into a negative delay (which made
// the jitter panic).
func TestBackoffCapsTheExponent(t *testing.T) {
	s := &Store{cfg: config{baseBackoff: 10 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range []int{1, 40, 41, 64, 1000} {
		if err := s.backoff(ctx, n); err != context.Canceled {
			t.Errorf("backoff before attempt %d: got %v, want context.Canceled", n+1, err)
		}
	}
}
