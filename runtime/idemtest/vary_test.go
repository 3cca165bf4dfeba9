package idemtest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestVary: every scalar changes, and a string keeps the shape PostgreSQL
// checks: a uuid stays a uuid, a number a number, an email an email.
func TestVary(t *testing.T) {
	assert.Equal(t, 8, idemtest.Vary(7))
	assert.Equal(t, uint8(0), idemtest.Vary(uint8(255)), "wraps, but differs")
	assert.Equal(t, 3.0, idemtest.Vary(1.5))
	assert.Equal(t, float32(1), idemtest.Vary(float32(0)))
	assert.Equal(t, complex(2, 2), idemtest.Vary(complex(1, 1)))
	assert.True(t, idemtest.Vary(false))
	type currency string
	assert.Equal(t, currency("EUS"), idemtest.Vary(currency("EUR")))
	assert.Equal(t, "1", idemtest.Vary(""))
	assert.Equal(t, "--1", idemtest.Vary("--"))

	db := idemtest.New(t, idemtest.WithoutLedger())
	for _, c := range []struct{ in, cast string }{
		{"0b8e5c3a-6f0e-4a52-9c4e-2f1d7a9b3c5f", "uuid"},
		{"0B8E5C3A-6F0E-4A52-9C4E-2F1D7A9B3C5F", "uuid"},
		{"0b8e5c3a-6f0e-4a52-9c4e-2f1d7a9b3c59", "uuid"},
		{"0b8e5c3a-6f0e-4a52-9c4e-2f1d7a9b3c5f", "uuid"},
		{"1250", "numeric"},
		{"12.99", "numeric"},
		{"ada@example.com", "text"},
		{"2030-12-31", "date"},
		{"2030-02-28T23:59:59Z", "timestamptz"},
		{"192.168.0.9", "inet"},
	} {
		out := idemtest.Vary(c.in)
		require.NotEqual(t, c.in, out, c.in)
		assert.Len(t, out, len(c.in), "the shape (length) is kept: %s", c.in)
		var back string
		err := db.Pool.QueryRow(t.Context(), "SELECT $1::"+c.cast+"::text", out).Scan(&back)
		assert.NoError(t, err, "%s varied into %s, which PostgreSQL refuses as %s", c.in, out, c.cast)
	}
}
