package idem

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxScopeLen is the longest scope accepted, in bytes: with the key and the
// method it must fit one entry of the ledger's primary key index.
const MaxScopeLen = 1024

// ValidateScope reports why scope cannot name a tenant in the ledger, as a
// *ScopeError, or nil: it must be valid UTF-8 without NUL bytes (PostgreSQL
// text holds neither) and at most MaxScopeLen bytes. The empty scope (one
// tenant) is valid. The message never echoes the scope.
func ValidateScope(scope string) error {
	switch {
	case len(scope) > MaxScopeLen:
		return &ScopeError{Reason: fmt.Sprintf("%d bytes, longer than %d", len(scope), MaxScopeLen)}
	case !utf8.ValidString(scope):
		return &ScopeError{Reason: "not valid UTF-8"}
	case strings.IndexByte(scope, 0) >= 0:
		return &ScopeError{Reason: fmt.Sprintf("byte %d is NUL", strings.IndexByte(scope, 0)+1)}
	}
	return nil
}

// KeyPolicy says which idempotency keys are accepted.
type KeyPolicy struct {
	MinLen int // minimum length in bytes; at least 1
	MaxLen int // maximum length in bytes
}

// DefaultKeyPolicy accepts 1 to 255 visible ASCII characters (0x21–0x7E).
var DefaultKeyPolicy = KeyPolicy{MinLen: 1, MaxLen: 255}

// Validate reports why key is not acceptable, as a *KeyError, or nil. The
// message never echoes the key, so control characters cannot reach logs.
func (p KeyPolicy) Validate(key string) error {
	minLen := max(p.MinLen, 1)
	if len(key) < minLen {
		if len(key) == 0 {
			return &KeyError{Reason: "empty"}
		}
		return &KeyError{Reason: fmt.Sprintf("shorter than %d bytes", minLen)}
	}
	if p.MaxLen > 0 && len(key) > p.MaxLen {
		return &KeyError{Reason: fmt.Sprintf("%d bytes, longer than %d", len(key), p.MaxLen)}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return &KeyError{Reason: fmt.Sprintf("byte %d (0x%02x) is not a visible ASCII character", i+1, c)}
		}
	}
	return nil
}
