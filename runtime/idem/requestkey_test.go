package idem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestContextWithDefaultKeyKeepsTheCallersKey(t *testing.T) {
	ctx := idem.ContextWithDefaultKey(context.Background(), "from-request")
	k, ok := idem.KeyFrom(ctx)
	assert.True(t, ok)
	assert.Equal(t, "from-request", k)

	ctx = idem.ContextWithDefaultKey(idem.ContextWithKey(context.Background(), "from-caller"), "from-request")
	k, _ = idem.KeyFrom(ctx)
	assert.Equal(t, "from-caller", k)
}

type uuid [16]byte

func TestUUIDKey(t *testing.T) {
	u := uuid{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	assert.Equal(t, "123e4567-e89b-12d3-a456-426614174000", idem.UUIDKey(u))
	assert.Equal(t, "", idem.UUIDKey(uuid{}), "the zero UUID is no key")
	assert.NoError(t, idem.DefaultKeyPolicy.Validate(idem.UUIDKey(u)))
}

// A consumer's fallback key (the message's or the job's ID) keys a call
// only when neither the caller nor the request gives one: the request's
// field (-key) replaces it, a caller's key wins over both.
func TestFallbackKeyYieldsToTheRequestsKey(t *testing.T) {
	ctx := idem.ContextWithFallbackKey(context.Background(), "msg-id")
	k, ok := idem.KeyFrom(ctx)
	assert.True(t, ok)
	assert.Equal(t, "msg-id", k, "a wrapper without -key is keyed by the fallback")

	k, _ = idem.KeyFrom(idem.ContextWithDefaultKey(ctx, "from-request"))
	assert.Equal(t, "from-request", k, "a wrapper with -key is keyed by its field")

	ctx = idem.ContextWithFallbackKey(idem.ContextWithKey(context.Background(), "from-caller"), "msg-id")
	k, _ = idem.KeyFrom(idem.ContextWithDefaultKey(ctx, "from-request"))
	assert.Equal(t, "from-caller", k, "a caller's key wins")
}

// Outcome.Key reports the key a call ran under and whether it was the
// consumer's fallback: the request's own key (-key) replaces it.
func TestOutcomeKey(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name         string
		ctx          context.Context
		key          string
		fallback, ok bool
	}{
		{"fallback only", idem.ContextWithFallbackKey(context.Background(), "msg-1"), "msg-1", true, true},
		{"request key over the fallback", idem.ContextWithDefaultKey(idem.ContextWithFallbackKey(context.Background(), "msg-2"), "evt-2"), "evt-2", false, true},
		{"caller's key", keyed("caller-3"), "caller-3", false, true},
		{"no key", context.Background(), "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, o := idem.ContextWithOutcome(c.ctx)
			_, err := idem.Atomic(ctx, e.store, e.m, fp(c.name), charge(1))
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, idem.ErrNoKey)
			}
			key, fallback := o.Key()
			assert.Equal(t, c.key, key)
			assert.Equal(t, c.fallback, fallback)
		})
	}
}
