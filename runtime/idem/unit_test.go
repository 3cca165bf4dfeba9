package idem_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestKeyPolicy(t *testing.T) {
	p := idem.DefaultKeyPolicy
	for _, ok := range []string{"a", "8e0b3c1e-2d7a-4b55-9f0a-2f1c0d6e9a11", strings.Repeat("x", 255), "!~"} {
		assert.NoError(t, p.Validate(ok), ok)
	}
	cases := map[string]string{
		"":                       "empty",
		strings.Repeat("x", 256): "256 bytes, longer than 255",
		"a b":                    "byte 2 (0x20)",
		"tab\there":              "byte 4 (0x09)",
		"é":                      "byte 1 (0xc3)",
		"\x1b[31m":               "byte 1 (0x1b)",
	}
	for key, want := range cases {
		err := p.Validate(key)
		require.ErrorIs(t, err, idem.ErrInvalidKey, "%q", key)
		assert.Contains(t, err.Error(), want)
		assert.NotContains(t, err.Error(), "\x1b", "control characters are never echoed")
	}
	strict := idem.KeyPolicy{MinLen: 16, MaxLen: 64}
	assert.ErrorContains(t, strict.Validate("short"), "shorter than 16 bytes")
}

func TestContextHelpers(t *testing.T) {
	ctx := context.Background()
	_, ok := idem.KeyFrom(ctx)
	assert.False(t, ok)
	assert.Equal(t, "", idem.ScopeFrom(ctx))
	ctx = idem.ContextWithScope(idem.ContextWithKey(ctx, "k"), "acct_1")
	k, ok := idem.KeyFrom(ctx)
	assert.True(t, ok)
	assert.Equal(t, "k", k)
	assert.Equal(t, "acct_1", idem.ScopeFrom(ctx))
}

func TestFingerprintIsCanonical(t *testing.T) {
	sum := func(write func(f *idem.Fingerprinter)) string {
		f := idem.NewFingerprinter("M")
		write(f)
		return string(f.Sum())
	}
	seen := map[string]string{}
	distinct := map[string]func(f *idem.Fingerprinter){
		"nil bytes":   func(f *idem.Fingerprinter) { f.Bytes(nil) },
		"empty bytes": func(f *idem.Fingerprinter) { f.Bytes([]byte{}) },
		"empty str":   func(f *idem.Fingerprinter) { f.String("") },
		"ab,c":        func(f *idem.Fingerprinter) { f.String("ab"); f.String("c") },
		"a,bc":        func(f *idem.Fingerprinter) { f.String("a"); f.String("bc") },
		"+0":          func(f *idem.Fingerprinter) { f.Float(0) },
		"-0":          func(f *idem.Fingerprinter) { f.Float(math.Copysign(0, -1)) },
		"int 1":       func(f *idem.Fingerprinter) { f.Int(1) },
		"uint 1":      func(f *idem.Fingerprinter) { f.Uint(1) },
		"true":        func(f *idem.Fingerprinter) { f.Bool(true) },
		"len 0":       func(f *idem.Fingerprinter) { f.Len(0) },
		"field a":     func(f *idem.Fingerprinter) { f.Field("a"); f.Int(1) },
		"field b":     func(f *idem.Fingerprinter) { f.Field("b"); f.Int(1) },
	}
	for name, w := range distinct {
		s := sum(w)
		if other, dup := seen[s]; dup {
			t.Errorf("%s and %s hash the same", name, other)
		}
		seen[s] = name
		assert.Equal(t, s, sum(w), "%s is deterministic", name)
	}
	a := idem.NewFingerprinter("A").Sum()
	b := idem.NewFingerprinter("B").Sum()
	assert.NotEqual(t, a, b, "the method name is part of the fingerprint")
}

func TestParseIdent(t *testing.T) {
	id, err := idem.ParseIdent("billing.idempotency_keys")
	require.NoError(t, err)
	assert.Equal(t, `"billing"."idempotency_keys"`, id.Quoted())
	assert.Equal(t, "idempotency_keys_pkey", id.Derived("pkey"))
	for _, bad := range []string{"", "A", "a-b", "a.b.c", `a"b`, "a;drop", strings.Repeat("a", 64), "1a", "a."} {
		_, err := idem.ParseIdent(bad)
		assert.Error(t, err, bad)
	}
}

func TestLedgerDDL(t *testing.T) {
	l, err := idem.LedgerSchema("idempotency_keys")
	require.NoError(t, err)
	ddl := l.DDL()
	require.Len(t, ddl, 2)
	assert.Contains(t, ddl[0], `CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope", "method", "key")`)
	assert.Contains(t, ddl[1], `CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" ("expires_at")`)
	assert.Contains(t, l.CreateIndexSQL(l.Indexes[0], true), "CREATE INDEX CONCURRENTLY")
}

func TestValidateScope(t *testing.T) {
	for _, ok := range []string{"", "acct_42", "tenant/é", strings.Repeat("s", idem.MaxScopeLen)} {
		assert.NoError(t, idem.ValidateScope(ok))
	}
	for bad, want := range map[string]string{
		"a\x00b":                                "byte 2 is NUL",
		"\xff":                                  "not valid UTF-8",
		strings.Repeat("s", idem.MaxScopeLen+1): "1025 bytes, longer than 1024",
	} {
		err := idem.ValidateScope(bad)
		require.ErrorIs(t, err, idem.ErrInvalidScope)
		assert.Contains(t, err.Error(), want)
	}
}
