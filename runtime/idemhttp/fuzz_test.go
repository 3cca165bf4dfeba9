package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// FuzzParseKey checks that the parser never panics, never accepts a key the
// policy refuses, never echoes unprintable bytes in its errors, and accepts
// every valid key in both the bare and the sf-string form.
//
// Run it for a while with (the minimize bound keeps the fuzzer from stalling
// on a loaded machine):
//
//	go test -run='^$' -fuzz=FuzzParseKey -fuzztime=20s -fuzzminimizetime=100x ./runtime/idemhttp/
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"", " ", `"`, `""`, "abc", `"abc"`, `"a\"b\\c"`, `"abc`, `"abc\`, `"a\nb"`, `"abc";p=1`, `"a", "b"`,
		"a\x00b", "\"a\x7fb\"", "k\xc3\xa9y", " \t\"x\"\t ", strings.Repeat("a", 256), `"` + strings.Repeat(`\\`, 128) + `"`,
	} {
		f.Add(s)
	}
	policy := idem.KeyPolicy{MinLen: 1, MaxLen: 64}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := idemhttp.ParseKey([]string{v}, policy)
		if err != nil {
			msg := err.Error()
			for i := 0; i < len(msg); i++ {
				if c := msg[i]; c < 0x20 || c > 0x7e {
					t.Fatalf("error for %q holds byte 0x%02x: %q", v, c, msg)
				}
			}
			return
		}
		if verr := policy.Validate(key); verr != nil {
			t.Fatalf("accepted %q from %q, which the policy refuses: %v", key, v, verr)
		}
		// Every accepted key round-trips through the sf-string form, and
		// through the bare form unless it starts with a quote (a bare value
		// that starts with one is read as an sf-string).
		forms := []string{`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`}
		if !strings.HasPrefix(key, `"`) {
			forms = append(forms, key)
		}
		for _, form := range forms {
			again, err := idemhttp.ParseKey([]string{form}, policy)
			if err != nil || again != key {
				t.Fatalf("key %q (from %q) re-parsed from %q as %q, %v", key, v, form, again, err)
			}
		}
	})
}
