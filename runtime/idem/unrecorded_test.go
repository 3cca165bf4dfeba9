package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Quote is a response that holds a float, which JSON cannot carry as NaN.
type Quote struct{ Rate float64 }

// A response that cannot be stored after the body ran is stored as
// ErrOutcomeNotRecorded and replayed: the body never runs again, not even
// after the lock would have expired.
func TestExternalUnencodableResponseIsNeverRerun(t *testing.T) {
	e := newEnv(t)
	m := &idem.Method[Quote]{Name: "Test.Quote", Retention: retention, LockTimeout: lockTimeout}
	var runs atomic.Int64
	body := func(context.Context) (Quote, error) { runs.Add(1); return Quote{Rate: math.NaN()}, nil }
	_, err := idem.External(keyed("nan"), e.store, m, payFp("1"), body)
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded)

	e.clock.Advance(lockTimeout + time.Second)
	ctx, o := idem.ContextWithOutcome(keyed("nan"))
	_, again := idem.External(ctx, e.store, m, payFp("1"), body)
	require.ErrorIs(t, again, idem.ErrOutcomeNotRecorded)
	assert.True(t, o.Replayed())
	assert.Equal(t, err.Error(), again.Error(), "the replay says what the first answer said")
	assert.Equal(t, int64(1), runs.Load())
}

// A final error whose message holds a NUL byte and invalid UTF-8 (a bank's
// error body, say) is stored with that text made storable, and replayed so
// that errors.Is still holds.
func TestFinalErrorWithUnstorableTextIsReplayed(t *testing.T) {
	bankErr := fmt.Errorf("bank said \x00\xff\xfe: %w", errDeclined)
	t.Run("external", func(t *testing.T) {
		e := newEnv(t)
		m := payoutMethod()
		var runs atomic.Int64
		body := func(context.Context) (Payout, error) { runs.Add(1); return Payout{}, bankErr }
		_, err := idem.External(keyed("f"), e.store, m, payFp("100"), body)
		require.ErrorIs(t, err, errDeclined)
		e.clock.Advance(lockTimeout + time.Second)
		_, err = idem.External(keyed("f"), e.store, m, payFp("100"), body)
		require.ErrorIs(t, err, errDeclined)
		assert.Equal(t, "bank said \uFFFD: card declined", err.Error())
		assert.Equal(t, int64(1), runs.Load())
	})
	t.Run("atomic", func(t *testing.T) {
		e := newEnv(t)
		body := func(context.Context, pgx.Tx) (Receipt, error) { return Receipt{}, bankErr }
		_, err := idem.Atomic(keyed("f"), e.store, e.m, fp("100"), body)
		require.ErrorIs(t, err, errDeclined)
		ctx, o := idem.ContextWithOutcome(retried("f"))
		_, err = idem.Atomic(ctx, e.store, e.m, fp("100"), body)
		require.ErrorIs(t, err, errDeclined)
		assert.True(t, o.Replayed())
		assert.Equal(t, int64(1), e.executed.Load())
	})
}

// A step result holding NUL characters is recorded, and a takeover gets it
// back without running the step again.
func TestStepResultWithNULIsRecorded(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	var transfers atomic.Int64
	ref := "tr_\x00\u0000_1"
	work := func(crash bool) func(context.Context) (Payout, error) {
		return func(ctx context.Context) (Payout, error) {
			got, err := idem.Step(ctx, "transfer", func(context.Context) (string, error) { transfers.Add(1); return ref, nil })
			if err != nil {
				return Payout{}, err
			}
			if crash {
				panic("process died after the transfer")
			}
			return Payout{Ref: got}, nil
		}
	}
	require.Panics(t, func() { _, _ = idem.External(keyed("s"), e.store, m, payFp("100"), work(true)) })
	e.clock.Advance(lockTimeout)
	out, err := idem.External(keyed("s"), e.store, m, payFp("100"), work(false))
	require.NoError(t, err)
	assert.Equal(t, ref, out.Ref)
	assert.Equal(t, int64(1), transfers.Load(), "the recorded transfer is not repeated")
}

// badJSON encodes to bytes that are not UTF-8: no text column can hold them.
type badJSON struct{}

func (badJSON) MarshalJSON() ([]byte, error) { return []byte("\"\xff\""), nil }

// A step that ran but whose result cannot be recorded never releases the
// key, even when the body gives up with a transient error: the call's
// outcome becomes ErrOutcomeNotRecorded.
func TestUnrecordableStepNeverReleasesTheKey(t *testing.T) {
	e := newEnv(t)
	m := payoutMethod()
	var transfers atomic.Int64
	body := func(ctx context.Context) (Payout, error) {
		if _, err := idem.Step(ctx, "transfer", func(context.Context) (badJSON, error) { transfers.Add(1); return badJSON{}, nil }); err != nil {
			return Payout{}, fmt.Errorf("payout: %w", err) // not a final error
		}
		return Payout{Ref: "ok"}, nil
	}
	_, err := idem.External(keyed("u"), e.store, m, payFp("100"), body)
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded)
	_, err = idem.External(keyed("u"), e.store, m, payFp("100"), body)
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded, "the retry replays; it does not run the transfer again")
	e.clock.Advance(lockTimeout + time.Second)
	_, err = idem.External(keyed("u"), e.store, m, payFp("100"), body)
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded)
	assert.Equal(t, int64(1), transfers.Load())
}

// A step name the ledger cannot hold is refused before the step runs.
func TestStepNameValidatedBeforeItRuns(t *testing.T) {
	e := newEnv(t)
	ran := false
	_, err := idem.External(keyed("n"), e.store, payoutMethod(), payFp("100"), func(ctx context.Context) (Payout, error) {
		_, err := idem.Step(ctx, "bad\x00name", func(context.Context) (int, error) { ran = true; return 1, nil })
		return Payout{}, err
	})
	require.Error(t, err)
	assert.False(t, errors.Is(err, idem.ErrOutcomeNotRecorded))
	assert.True(t, strings.Contains(err.Error(), "step name"))
	assert.False(t, ran)
}
