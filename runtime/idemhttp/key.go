package idemhttp

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
)

// HeaderKey is the request header that carries the idempotency key.
const HeaderKey = "Idempotency-Key"

// HeaderReplayed is the response header set to "true" when the response is a
// replay of a stored one.
const HeaderReplayed = "Idempotent-Replayed"

// HeaderRetention is the response header that says how long the server
// remembers the key: the retention window of the operation, in whole seconds
// (rounded up), counted from the first request sent with the key. A retry
// sent later under the key is treated as a new request.
//
// The draft leaves expiry to each API's documentation (section
// "Idempotency Key Validity and Expiry"); its working group's open issue on
// advertising it in a response header (ietf-wg-httpapi/idempotency#35)
// proposes a period, as here. A period counted from the client's own first
// attempt needs no agreement between the client's and the server's clocks,
// and it is the same on the first response and on every replay, where an
// absolute time would have to be read back from the stored row. As that
// issue notes, a client whose first response was lost has not seen the
// header: the window is documented too (the retention in the generated
// method's doc comment).
const HeaderRetention = "Idempotency-Key-Retention"

// HeaderPreviousAttempts is the request header a client sets on a retry:
// how many attempts of the same request (under the same key) it sent
// before this one, as gRPC's grpc-previous-rpc-attempts does. Transport
// sets it on every attempt after the first. The middleware marks a
// request whose value is a whole number above 0 as a possible retry
// (idem.ContextWithRetry), so the idempotent call looks its key up before
// its body runs: it costs a stored answer one round trip instead of a run
// of the body that is rolled back. A wrong or missing value changes what
// the call costs, never what it answers.
const HeaderPreviousAttempts = "Idempotency-Previous-Attempts"

// retried reports whether a request's HeaderPreviousAttempts values say it
// is a retry.
func retried(values []string) bool {
	for _, v := range values {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// ParseKey parses the values of the Idempotency-Key header (as returned by
// http.Header.Values) and validates the key with p.
//
// Exactly one value must be present. Surrounding spaces and tabs are ignored.
// A value that starts with a double quote is parsed as an RFC 8941 sf-string
// ("abc", with \" and \\ as the only escapes; Structured Field parameters are
// refused); any other value is the key itself (the bare form). Either way the
// key must then satisfy p. A policy without a maximum length gets
// idem.DefaultKeyPolicy's, so the accepted input is always bounded.
//
// With no value, the error matches idem.ErrNoKey. Every other failure is an
// *idem.KeyError (errors.Is(err, idem.ErrInvalidKey)) whose Reason names the
// problem by position and byte value, never echoing the header.
func ParseKey(values []string, p idem.KeyPolicy) (string, error) {
	switch len(values) {
	case 0:
		return "", fmt.Errorf("idemhttp: %s header: %w", HeaderKey, idem.ErrNoKey)
	case 1:
	default:
		return "", keyErr("the header is sent %d times; send it exactly once", len(values))
	}
	p = bounded(p)
	v := strings.Trim(values[0], " \t")
	// A quoted key of MaxLen bytes takes at most 2·MaxLen+2 bytes (every byte
	// escaped, plus the quotes). Anything longer is refused before parsing.
	if limit := 2*p.MaxLen + 2; len(v) > limit {
		return "", keyErr("the header value is %d bytes, longer than any acceptable key (at most %d bytes)", len(v), p.MaxLen)
	}
	key := v
	if strings.HasPrefix(v, `"`) {
		var err error
		if key, err = parseSFString(v); err != nil {
			return "", err
		}
	}
	if err := p.Validate(key); err != nil {
		return "", fmt.Errorf("idemhttp: %s header: %w", HeaderKey, err)
	}
	return key, nil
}

// bounded returns p with a maximum length: DefaultKeyPolicy's when p has none.
func bounded(p idem.KeyPolicy) idem.KeyPolicy {
	if p.MaxLen <= 0 {
		p.MaxLen = idem.DefaultKeyPolicy.MaxLen
	}
	return p
}

// parseSFString parses v, which starts with a double quote, as an RFC 8941
// sf-string (section 4.2.5) that must make up the whole value.
func parseSFString(v string) (string, error) {
	// Fast path: no escapes, the closing quote ends the value, and every byte
	// is allowed. Anything else takes the loop below, which names the problem.
	if len(v) >= 2 && v[len(v)-1] == '"' {
		if inner := v[1 : len(v)-1]; !strings.ContainsAny(inner, `"\`) && printableASCII(inner) {
			return inner, nil
		}
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) {
				return "", keyErr("the quoted string ends in a backslash and has no closing quote")
			}
			if n := v[i]; n != '"' && n != '\\' {
				return "", keyErr(`byte %d (%s) follows a backslash in the quoted string; only \" and \\ are escapes`, i+1, hexByte(n))
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				if v[i+1] == ';' {
					return "", keyErr("byte %d starts Structured Field parameters after the quoted string; parameters are not supported", i+2)
				}
				return "", keyErr("byte %d (%s) follows the closing quote; the value must be a single quoted string", i+2, hexByte(v[i+1]))
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", keyErr("byte %d (%s) is not allowed in a quoted string", i+1, hexByte(c))
		default:
			b.WriteByte(c)
		}
	}
	return "", keyErr("the quoted string has no closing quote")
}

// printableASCII reports whether s holds only bytes 0x20–0x7e, the bytes an
// sf-string may hold unescaped.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// hexByte renders a byte for a message without echoing it: 0x0a, not "\n".
func hexByte(c byte) string { return fmt.Sprintf("0x%02x", c) }

func keyErr(format string, args ...any) error {
	return fmt.Errorf("idemhttp: %s header: %w", HeaderKey, &idem.KeyError{Reason: fmt.Sprintf(format, args...)})
}
