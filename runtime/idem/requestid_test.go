package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

const (
	testUUID4 = "0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5c"
	testUUID7 = "01939d4e-7c2a-7b3c-9d4e-5f6a7b8c9d0e"
)

func TestIsUUID(t *testing.T) {
	for s, want := range map[string][2]bool{ // IsUUID, IsUUID4
		testUUID4:                              {true, true},
		strings.ToUpper(testUUID4):             {true, true},
		testUUID7:                              {true, false},
		"00000000-0000-0000-0000-000000000000": {false, false},
		"ffffffff-ffff-ffff-ffff-ffffffffffff": {false, false},
		"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF": {false, false},
		"0b6f1e0c-5a4e-1f3b-9d2a-7c1e2f3a4b5c": {true, false}, // version 1
		"0b6f1e0c-5a4e-4f3b-cd2a-7c1e2f3a4b5c": {true, false}, // variant 110x
		"0b6f1e0c-5a4e-4f3b-7d2a-7c1e2f3a4b5c": {true, false}, // variant 0xxx
		"0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5":  {false, false},
		"0b6f1e0c5a4e4f3b9d2a7c1e2f3a4b5c":     {false, false},
		"{0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b}": {false, false},
		"0b6f1e0c-5a4e-4f3b-9d2a-7c1e2f3a4b5g": {false, false},
		"0b6f1e0c_5a4e-4f3b-9d2a-7c1e2f3a4b5c": {false, false},
	} {
		assert.Equal(t, want[0], idem.IsUUID(s), "IsUUID(%s)", s)
		assert.Equal(t, want[1], idem.IsUUID4(s), "IsUUID4(%s)", s)
	}
}

func TestRequestKey(t *testing.T) {
	p := idem.DefaultKeyPolicy
	const via = "metadata idempotency-key"
	for _, tc := range []struct {
		format    idem.RequestIDFormat
		sent, id  string
		want      string
		refusedAs string // a substring of the *KeyError's reason
	}{
		{idem.RequestIDUUID4, "", "", "", ""},
		{idem.RequestIDUUID4, "abc", "", "abc", ""},
		{idem.RequestIDUUID4, "", strings.ToUpper(testUUID4), testUUID4, ""},
		{idem.RequestIDUUID4, strings.ToUpper(testUUID4), testUUID4, testUUID4, ""},
		{idem.RequestIDUUID4, "", testUUID7, "", "field request_id is not a UUID4 (36 characters, version 4, the nil UUID refused), the format this server requires"},
		{idem.RequestIDUUID4, "other", testUUID4, "", "metadata idempotency-key and field request_id name different keys"},
		{idem.RequestIDUUID, "", strings.ToUpper(testUUID7), testUUID7, ""},
		{idem.RequestIDUUID, "", "01JEQ5X3V1K9N8M7P6Q5R4S3T2", "", "is not a UUID (36 characters, any version, the nil and max UUIDs refused)"},
		{idem.RequestIDKey, "", "Order-77", "Order-77", ""},
		{idem.RequestIDKey, "Order-77", "Order-77", "Order-77", ""},
		{idem.RequestIDKey, "order-77", "Order-77", "", "name different keys"},
		{idem.RequestIDKey, "", "has space", "", "field request_id: byte 4 (0x20) is not a visible ASCII character"},
		{idem.RequestIDKey, "", strings.Repeat("k", 300), "", "field request_id: 300 bytes, longer than 255"},
	} {
		got, err := tc.format.RequestKey(tc.sent, via, tc.id, p)
		if tc.refusedAs == "" {
			require.NoError(t, err, "%s %q %q", tc.format, tc.sent, tc.id)
			assert.Equal(t, tc.want, got)
			continue
		}
		var ke *idem.KeyError
		require.True(t, errors.As(err, &ke), "%s %q %q: %v", tc.format, tc.sent, tc.id, err)
		assert.Contains(t, ke.Reason, tc.refusedAs)
		assert.NotContains(t, ke.Reason, "AIP-155", "what this server requires")
		if tc.id != "" && len(tc.id) > 3 {
			assert.NotContains(t, ke.Reason, tc.id, "the reason never echoes the key")
		}
		assert.Empty(t, got)
	}
	// A policy stricter than a UUID holds for request_ids too.
	_, err := idem.RequestIDUUID4.RequestKey("", via, testUUID4, idem.KeyPolicy{MinLen: 40, MaxLen: 255})
	assert.ErrorIs(t, err, idem.ErrInvalidKey)
}

func TestRequestIDFormatCheck(t *testing.T) {
	for _, f := range []idem.RequestIDFormat{idem.RequestIDUUID4, idem.RequestIDUUID, idem.RequestIDKey} {
		assert.NoError(t, f.Check(), "%s", f)
	}
	for _, f := range []idem.RequestIDFormat{-1, 3} {
		assert.Error(t, f.Check())
		_, err := f.RequestKey("", "", "x", idem.DefaultKeyPolicy)
		assert.Error(t, err)
	}
	assert.Equal(t, idem.RequestIDUUID4, idem.RequestIDFormat(0), "the zero value is what AIP-155 asks for")
}
