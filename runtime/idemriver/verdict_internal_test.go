package idemriver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

type args struct{}

func (args) Kind() string { return "k" }

func TestVerdict(t *testing.T) {
	errFinal := errors.New("declined")
	cfg := Config[args]{Final: FinalErrors(errFinal)}
	job := &river.Job[args]{JobRow: &rivertype.JobRow{ID: 1, Kind: "k"}}
	var snooze *river.JobSnoozeError
	var cancel *river.JobCancelError

	assert.NoError(t, cfg.verdict(job, nil))
	err := cfg.verdict(job, fmt.Errorf("call: %w", &idem.InProgressError{RetryAfter: 3 * time.Second}))
	if assert.ErrorAs(t, err, &snooze) {
		assert.Equal(t, 3*time.Second, snooze.Duration)
	}
	for _, e := range []error{&idem.MismatchError{}, &idem.KeyError{Reason: "empty"}, idem.ErrNoKey, &idem.ScopeError{},
		fmt.Errorf("x: %w", errFinal), &idem.ReplayedError{Msg: "declined"}} {
		assert.ErrorAs(t, cfg.verdict(job, e), &cancel, "%v", e)
	}
	for _, e := range []error{idem.ErrStore, errors.New("timeout"), idem.ErrLockLost} {
		err := cfg.verdict(job, e)
		assert.False(t, errors.As(err, &cancel) || errors.As(err, &snooze), "%v retries", e)
		assert.ErrorIs(t, err, e)
	}
}

// TestRetryMark: from the job's second attempt on, the call is marked a
// possible retry (idem.ContextWithRetry), so it looks its key up first.
func TestRetryMark(t *testing.T) {
	var cfg Config[args]
	for attempt, want := range map[int]bool{1: false, 2: true, 5: true} {
		job := &river.Job[args]{JobRow: &rivertype.JobRow{ID: 1, Kind: "k", Attempt: attempt}}
		assert.Equal(t, want, idem.RetryFrom(cfg.context(t.Context(), job)), "attempt %d", attempt)
	}
}
