package idem_test

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestClassify(t *testing.T) {
	final := true
	for _, tc := range []struct {
		err   error
		want  idem.Class
		final bool
	}{
		{nil, idem.Class{Kind: idem.KindOther}, !final},
		{errors.New("card declined"), idem.Class{Kind: idem.KindOther}, !final},
		{&idem.ReplayedError{Name: "ErrCardDeclined", Msg: "card declined"}, idem.Class{Kind: idem.KindReplayed}, final},
		{fmt.Errorf("Charge: %w", idem.ErrNoKey), idem.Class{Kind: idem.KindNoKey}, final},
		{&idem.KeyError{Reason: "byte 3 (0x0a) is not a visible ASCII character"},
			idem.Class{Kind: idem.KindInvalidKey, Reason: "byte 3 (0x0a) is not a visible ASCII character"}, final},
		{&idem.KeyError{Reason: "bad \x1b[2J byte é"}, idem.Class{Kind: idem.KindInvalidKey, Reason: "bad ?[2J byte ??"}, final},
		{idem.ErrInvalidKey, idem.Class{Kind: idem.KindInvalidKey}, final},
		{&idem.ScopeError{Reason: "not valid UTF-8"}, idem.Class{Kind: idem.KindInvalidScope, Reason: "not valid UTF-8"}, final},
		{idem.ErrInvalidScope, idem.Class{Kind: idem.KindInvalidScope}, final},
		{&idem.MismatchError{Key: "k"}, idem.Class{Kind: idem.KindMismatch}, final},
		{&idem.InProgressError{RetryAfter: 2500 * time.Millisecond}, idem.Class{Kind: idem.KindInProgress, RetryAfter: 2500 * time.Millisecond}, !final},
		{&idem.InProgressError{RetryAfter: time.Millisecond}, idem.Class{Kind: idem.KindInProgress, RetryAfter: time.Second}, !final},
		{idem.ErrInProgress, idem.Class{Kind: idem.KindInProgress, RetryAfter: time.Second}, !final},
		{fmt.Errorf("Payout: %w", idem.ErrLockLost), idem.Class{Kind: idem.KindLockLost, RetryAfter: time.Second}, !final},
		{fmt.Errorf("%w: dial: refused", idem.ErrStore), idem.Class{Kind: idem.KindStoreUnavailable}, !final},
		{idem.ErrOutcomeNotRecorded, idem.Class{Kind: idem.KindOutcomeUnknown}, final},
		{&idem.ReplayedError{Name: "idem:outcome-not-recorded", Sentinel: idem.ErrOutcomeNotRecorded}, idem.Class{Kind: idem.KindOutcomeUnknown}, final},
		{errors.Join(idem.ErrOutcomeNotRecorded, idem.ErrStore), idem.Class{Kind: idem.KindStoreUnavailable}, !final},
		// The first rule that matches wins.
		{errors.Join(idem.ErrMismatch, idem.ErrStore), idem.Class{Kind: idem.KindMismatch}, final},
		{errors.Join(idem.ErrNoKey, &idem.ScopeError{Reason: "x"}), idem.Class{Kind: idem.KindNoKey}, final},
	} {
		tc.want.Final = tc.final
		assert.Equal(t, tc.want, idem.Classify(tc.err), "%v", tc.err)
	}
}

func TestKindReasons(t *testing.T) {
	seen := map[string]idem.Kind{}
	aip193 := regexp.MustCompile(`^[A-Z][A-Z0-9_]+[A-Z0-9]$`)
	for k := idem.KindOther; k <= idem.KindOutcomeUnknown; k++ {
		assert.NotContains(t, k.String(), "?", "every kind has a name")
		r := k.Reason()
		if k == idem.KindOther || k == idem.KindReplayed {
			assert.Empty(t, r, "%s is the application's", k)
			continue
		}
		assert.Regexp(t, aip193, r, "%s", k)
		assert.LessOrEqual(t, len(r), 63)
		prev, dup := seen[r]
		assert.False(t, dup, "%s and %s share %s", prev, k, r)
		seen[r] = k
	}
	assert.Equal(t, "IDEMPOTENCY_KEY_REUSED", idem.KindMismatch.Reason())
	assert.Equal(t, "Kind(?)", idem.Kind(99).String())
}
