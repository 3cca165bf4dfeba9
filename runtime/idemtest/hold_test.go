package idemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestHoldKeepsTheFirstBodyUntilReleased(t *testing.T) {
	h := idemtest.NewHold()
	first := make(chan error, 1)
	go func() { first <- h.Pass(t.Context()) }()
	<-h.Reached()
	require.NoError(t, h.Pass(t.Context()), "a later body passes at once")
	select {
	case err := <-first:
		t.Fatalf("the first body passed before the release: %v", err)
	default:
	}
	h.Release()
	h.Release()
	require.NoError(t, <-first)
	assert.EqualValues(t, 2, h.Passed())

	h.Rearm()
	assert.Zero(t, h.Passed())
	select {
	case <-h.Reached():
		t.Fatal("a rearmed hold was reached before any body passed it")
	default:
	}
	ctx, cancel := context.WithCancel(t.Context())
	again := make(chan error, 1)
	go func() { again <- h.Pass(ctx) }()
	<-h.Reached()
	cancel()
	assert.ErrorIs(t, <-again, context.Canceled, "a held body gives up with its context")
}

// TestBenchTwinsOfAHolder: each iteration holds the first call in its
// body, times the twin while it is held, then lets the first finish.
func TestBenchTwinsOfAHolder(t *testing.T) {
	h := idemtest.NewHold()
	var twins, whileHeld int
	r := testing.Benchmark(func(b *testing.B) {
		idemtest.BenchTwinsOfAHolder(b, h, time.Second,
			func(ctx context.Context, _ string) error { return h.Pass(ctx) },
			func(context.Context, string) error {
				twins++
				select {
				case <-h.Reached():
					whileHeld++
				default:
				}
				return nil
			})
	})
	assert.Positive(t, r.N)
	assert.Equal(t, twins, whileHeld, "every twin ran while the first call was held")
	assert.Contains(t, r.Extra, "max-over-bound-ms")
	assert.Less(t, r.Extra["max-over-bound-ms"], 0.0, "twins that do not wait end before the bound")
}
