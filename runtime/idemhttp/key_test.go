package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", 255)
	tests := []struct {
		name   string
		values []string
		policy idem.KeyPolicy
		want   string
		reason string // substring of the *idem.KeyError reason; "" when want is accepted
		noKey  bool   // the error matches idem.ErrNoKey
	}{
		{name: "bare uuid", values: []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "sf-string uuid", values: []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "sf-string escaped quote", values: []string{`"a\"b"`}, want: `a"b`},
		{name: "sf-string escaped backslash", values: []string{`"a\\b"`}, want: `a\b`},
		{name: "sf-string only escapes", values: []string{`"\"\\"`}, want: `"\`},
		{name: "bare with quote inside", values: []string{`ab"c`}, want: `ab"c`},
		{name: "bare with backslash", values: []string{`a\b`}, want: `a\b`},
		{name: "bare one char", values: []string{"x"}, want: "x"},
		{name: "surrounding spaces and tabs", values: []string{" \t abc \t"}, want: "abc"},
		{name: "spaces around sf-string", values: []string{`  "abc"  `}, want: "abc"},
		{name: "bare 255 bytes", values: []string{long}, want: long},
		{name: "sf-string 255 bytes", values: []string{`"` + long + `"`}, want: long},
		{name: "sf-string 255 escaped bytes", values: []string{`"` + strings.Repeat(`\\`, 255) + `"`}, want: strings.Repeat(`\`, 255)},

		{name: "missing", values: nil, noKey: true},
		{name: "empty", values: []string{""}, reason: "empty"},
		{name: "only whitespace", values: []string{"  \t "}, reason: "empty"},
		{name: "empty sf-string", values: []string{`""`}, reason: "empty"},
		{name: "two headers", values: []string{"a", "b"}, reason: "sent 2 times"},
		{name: "two identical headers", values: []string{"a", "a"}, reason: "sent 2 times"},
		{name: "bare 256 bytes", values: []string{long + "k"}, reason: "256 bytes, longer than 255"},
		{name: "sf-string 256 bytes", values: []string{`"` + long + `k"`}, reason: "256 bytes, longer than 255"},
		{name: "huge value refused before parsing", values: []string{strings.Repeat("a", 1<<20)}, reason: "1048576 bytes, longer than any acceptable key"},
		{name: "huge sf-string refused before parsing", values: []string{`"` + strings.Repeat(`\"`, 300) + `"`}, reason: "602 bytes, longer than any acceptable key"},
		{name: "inner space bare", values: []string{"a b"}, reason: "byte 2 (0x20)"},
		{name: "inner space sf-string", values: []string{`"a b"`}, reason: "byte 2 (0x20)"},
		{name: "newline bare", values: []string{"a\nb"}, reason: "byte 2 (0x0a)"},
		{name: "nul bare", values: []string{"ab\x00"}, reason: "byte 3 (0x00)"},
		{name: "escape char bare", values: []string{"\x1b[31m"}, reason: "byte 1 (0x1b)"},
		{name: "del bare", values: []string{"a\x7f"}, reason: "byte 2 (0x7f)"},
		{name: "utf-8 bare", values: []string{"kéy"}, reason: "byte 2 (0xc3)"},
		{name: "control char in sf-string", values: []string{"\"a\x01b\""}, reason: "byte 3 (0x01) is not allowed in a quoted string"},
		{name: "tab in sf-string", values: []string{"\"a\tb\""}, reason: "byte 3 (0x09) is not allowed in a quoted string"},
		{name: "high byte in sf-string", values: []string{"\"a\xffb\""}, reason: "byte 3 (0xff) is not allowed in a quoted string"},
		{name: "unterminated sf-string", values: []string{`"abc`}, reason: "no closing quote"},
		{name: "lone quote", values: []string{`"`}, reason: "no closing quote"},
		{name: "escaped closing quote", values: []string{`"abc\"`}, reason: "no closing quote"},
		{name: "trailing backslash", values: []string{`"abc\`}, reason: "ends in a backslash"},
		{name: "bad escape", values: []string{`"a\nb"`}, reason: `byte 4 (0x6e) follows a backslash`},
		{name: "bytes after closing quote", values: []string{`"abc"def`}, reason: "byte 6 (0x64) follows the closing quote"},
		{name: "two sf-strings combined", values: []string{`"a", "b"`}, reason: "byte 4 (0x2c) follows the closing quote"},
		{name: "sf parameters", values: []string{`"abc";v=1`}, reason: "parameters are not supported"},
		{name: "policy min length", values: []string{"abc"}, policy: idem.KeyPolicy{MinLen: 8, MaxLen: 64}, reason: "shorter than 8 bytes"},
		{name: "policy max length", values: []string{"abcdefghi"}, policy: idem.KeyPolicy{MinLen: 1, MaxLen: 8}, reason: "9 bytes, longer than 8"},
		{name: "policy without max is bounded", values: []string{long + "k"}, policy: idem.KeyPolicy{MinLen: 1}, reason: "256 bytes, longer than 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := tt.policy
			if policy == (idem.KeyPolicy{}) {
				policy = idem.DefaultKeyPolicy
			}
			got, err := idemhttp.ParseKey(tt.values, policy)
			switch {
			case tt.noKey:
				require.ErrorIs(t, err, idem.ErrNoKey)
				assert.NotErrorIs(t, err, idem.ErrInvalidKey)
			case tt.reason != "":
				require.ErrorIs(t, err, idem.ErrInvalidKey)
				var ke *idem.KeyError
				require.ErrorAs(t, err, &ke)
				assert.Contains(t, ke.Reason, tt.reason)
				assertPrintable(t, err.Error())
				assert.Empty(t, got)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// assertPrintable fails if s holds a byte outside printable ASCII.
func assertPrintable(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			t.Errorf("byte %d of %q is 0x%02x, not printable ASCII", i, s, c)
			return
		}
	}
}
