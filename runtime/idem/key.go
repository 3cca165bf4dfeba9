package idem

import "fmt"

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
