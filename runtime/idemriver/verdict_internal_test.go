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
