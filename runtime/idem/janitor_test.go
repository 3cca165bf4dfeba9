package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestStartJanitor refuses a bad interval before starting anything, and
// otherwise sweeps at once and stops with its context.
func TestStartJanitor(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL))
	clock := idemtest.NewClock(time.Time{})
	swept := make(chan int64, 1)
	s, err := idem.NewStore(db.Pool, idem.WithClock(clock.Now), idem.WithHooks(idem.Hooks{
		Swept: func(_ context.Context, e idem.Event) { swept <- e.Rows },
	}))
	require.NoError(t, err)

	for _, interval := range []time.Duration{0, -time.Second} {
		stopped, err := s.StartJanitor(t.Context(), interval, 0)
		require.Error(t, err, interval)
		assert.Contains(t, err.Error(), "interval must be positive")
		assert.Nil(t, stopped)
	}

	_, err = idem.Atomic(keyed("k"), s, chargeMethod(), fp("1"), charge(100))
	require.NoError(t, err)
	clock.Advance(retention + time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	stopped, err := s.StartJanitor(ctx, time.Hour, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), <-swept, "the first sweep runs at once")
	cancel()
	<-stopped
}
