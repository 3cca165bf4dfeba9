package idem

import (
	"errors"
	"fmt"
	"strings"
)

// RequestIDField is the name of the AIP-155 request identifier field: a
// string field of a request message that holds the request's idempotency
// key. runtime/idemgrpc and runtime/idemconnect read it.
const RequestIDField = "request_id"

// RequestIDFormat is the format a server requires of an AIP-155 request_id.
// AIP-155 asks for a UUID4 unless the service documents another format; the
// zero value is RequestIDUUID4.
type RequestIDFormat int

// The formats a request_id may be required to have.
const (
	// RequestIDUUID4 accepts a UUID of version 4 (RFC 9562) in its
	// canonical 36-character form, in either case ([IsUUID4]); the key is
	// its lower-case form.
	RequestIDUUID4 RequestIDFormat = iota
	// RequestIDUUID accepts a UUID of any version in its canonical
	// 36-character form, in either case, but not the nil and the max UUID
	// ([IsUUID]); the key is its lower-case form. For clients that send
	// UUIDv7s.
	RequestIDUUID
	// RequestIDKey accepts any value the server's KeyPolicy accepts, as an
	// idempotency key sent in a header is: the key is the value as sent.
	RequestIDKey
)

// String says what f requires, for messages: "a UUID4 (...)", "a UUID
// (...)", or "a key of ...".
func (f RequestIDFormat) String() string {
	switch f {
	case RequestIDUUID4:
		return "a UUID4 (36 characters, version 4, the nil UUID refused)"
	case RequestIDUUID:
		return "a UUID (36 characters, any version, the nil and max UUIDs refused)"
	case RequestIDKey:
		return "an idempotency key (visible ASCII characters, as the key policy bounds them)"
	}
	return fmt.Sprintf("RequestIDFormat(%d)", int(f))
}

// Check returns an error when f is not one of the formats above: a wiring
// mistake the transports' constructors refuse at start-up.
func (f RequestIDFormat) Check() error {
	if f < RequestIDUUID4 || f > RequestIDKey {
		return fmt.Errorf("idem: request_id format %d is not one of RequestIDUUID4, RequestIDUUID, RequestIDKey", int(f))
	}
	return nil
}

// RequestKey returns the idempotency key of a request that sent the key
// sent ("" if none; already validated with p) in a header or metadata named
// by via (e.g. "metadata idempotency-key"), and the request_id id ("" if the
// field is absent or empty). With no id it is sent. An id must have format f
// and pass p; a UUID's key is its lower-case form. When both are sent they
// must name the same key (a UUID compared in any case). The error is a
// *KeyError that says what this server requires, never echoing a key.
func (f RequestIDFormat) RequestKey(sent, via, id string, p KeyPolicy) (string, error) {
	if id == "" {
		return sent, nil
	}
	key := id
	switch f {
	case RequestIDUUID4, RequestIDUUID:
		if ok := IsUUID(id); !ok || f == RequestIDUUID4 && !IsUUID4(id) {
			return "", &KeyError{Reason: fmt.Sprintf("field %s is not %s, the format this server requires", RequestIDField, f)}
		}
		key = strings.ToLower(id)
	default:
		if err := f.Check(); err != nil {
			return "", err
		}
	}
	if err := p.Validate(key); err != nil {
		var ke *KeyError
		if errors.As(err, &ke) {
			return "", &KeyError{Reason: fmt.Sprintf("field %s: %s", RequestIDField, ke.Reason)}
		}
		return "", err
	}
	same := sent == key || f != RequestIDKey && strings.EqualFold(sent, key)
	if sent != "" && !same {
		return "", &KeyError{Reason: fmt.Sprintf("%s and field %s name different keys; send one, or the same in both", via, RequestIDField)}
	}
	return key, nil
}

// IsUUID4 reports whether s is a UUID of version 4 (RFC 9562) in its
// canonical 36-character textual form, in either case:
// xxxxxxxx-xxxx-4xxx-Yxxx-xxxxxxxxxxxx with Y one of 8, 9, a, b. The nil
// UUID is not one (its version is 0), nor is the max UUID.
func IsUUID4(s string) bool {
	return IsUUID(s) && s[14] == '4' && strings.IndexByte("89abAB", s[19]) >= 0
}

// IsUUID reports whether s is a UUID in its canonical 36-character textual
// form, in either case (8-4-4-4-12 hexadecimal digits), other than the nil
// UUID and the max UUID, whatever its version and variant.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != "00000000-0000-0000-0000-000000000000" && !strings.EqualFold(s, "ffffffff-ffff-ffff-ffff-ffffffffffff")
}
