package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pacedStore is a store whose sweep pauses are recorded instead of slept.
func pacedStore(share float64, swept *[]time.Duration, pauses *[]time.Duration, pauseErr error) *Store {
	return &Store{
		cfg: config{sweepShare: share, hooks: Hooks{Swept: func(_ context.Context, ev Event) { *swept = append(*swept, ev.Duration) }}},
		pause: func(_ context.Context, d time.Duration) error {
			*pauses = append(*pauses, d)
			return pauseErr
		},
	}
}

// After every full batch the sweep pauses for the batch's time times
// (1-share)/share; after the short batch that ends it, it does not pause.
func TestSweepPacesFullBatches(t *testing.T) {
	var swept, pauses []time.Duration
	s := pacedStore(0.25, &swept, &pauses, nil)
	batches := []int64{10, 10, 4}
	calls := 0
	total, err := s.sweepBatches(context.Background(), 10, func(batch int) (int64, error) {
		assert.Equal(t, 10, batch)
		calls++
		return batches[calls-1], nil
	}, Event{})
	require.NoError(t, err)
	assert.Equal(t, int64(24), total)
	assert.Equal(t, 3, calls)
	require.Len(t, swept, 3, "every non-empty batch is reported")
	require.Len(t, pauses, 2, "a pause after each full batch, none after the last")
	for i, d := range pauses {
		assert.Equal(t, sweepPause(swept[i], 0.25), d, "pause %d", i)
	}
}

// A sweep whose pause is cut short by its context stops there and reports
// what it deleted so far.
func TestSweepPauseEndsWithContext(t *testing.T) {
	var swept, pauses []time.Duration
	s := pacedStore(0.5, &swept, &pauses, context.Canceled)
	total, err := s.sweepBatches(context.Background(), 5, func(int) (int64, error) { return 5, nil }, Event{})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(5), total)
	assert.Len(t, pauses, 1)

	s.pause = sleepCtx
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.pause(ctx, time.Hour), context.Canceled, "an ended context ends the pause at once")
	assert.NoError(t, sleepCtx(context.Background(), 0))
}

// A failing batch ends the sweep with its error, without a pause.
func TestSweepStopsAtAFailedBatch(t *testing.T) {
	var swept, pauses []time.Duration
	s := pacedStore(0.5, &swept, &pauses, nil)
	boom := errors.New("boom")
	calls := 0
	total, err := s.sweepBatches(context.Background(), 5, func(int) (int64, error) {
		calls++
		if calls == 2 {
			return 0, boom
		}
		return 5, nil
	}, Event{})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, int64(5), total)
	assert.Len(t, pauses, 1)
}

func TestSweepPause(t *testing.T) {
	for _, tc := range []struct {
		took  time.Duration
		share float64
		want  time.Duration
	}{
		{100 * time.Millisecond, 0.25, 300 * time.Millisecond},
		{100 * time.Millisecond, 0.5, 100 * time.Millisecond},
		{100 * time.Millisecond, 1, 0},
		{0, 0.25, 0},
	} {
		assert.Equal(t, tc.want, sweepPause(tc.took, tc.share), "%s at share %g", tc.took, tc.share)
	}
}
