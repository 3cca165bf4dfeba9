package idem

import (
	"errors"
	"time"
)

// Kind names what an error returned by an idempotent call (or by the
// validation of its key or scope) means to the caller. The transports answer
// each kind from a table of their own: runtime/idemhttp with a problem type
// and an HTTP status, runtime/idemgrpc and runtime/idemconnect with a code
// and a google.rpc.ErrorInfo reason ([Kind.Reason]).
type Kind int

// The kinds [Classify] returns.
const (
	// KindOther is an error that is not the runtime's: the application's
	// own, which its service answers as it answers any other error.
	KindOther Kind = iota
	// KindReplayed is a final error the first attempt returned and stored,
	// replayed (*ReplayedError). It is the application's error too: its
	// message and sentinel are the first answer's.
	KindReplayed
	// KindNoKey: the call carried no idempotency key (ErrNoKey).
	KindNoKey
	// KindInvalidKey: the key failed validation (ErrInvalidKey, *KeyError).
	KindInvalidKey
	// KindInvalidScope: the scope cannot name a tenant (ErrInvalidScope,
	// *ScopeError), or a transport could not determine it.
	KindInvalidScope
	// KindMismatch: the key was used with another request (ErrMismatch,
	// *MismatchError).
	KindMismatch
	// KindInProgress: another attempt holds the key (ErrInProgress,
	// *InProgressError).
	KindInProgress
	// KindLockLost: another attempt took the key over from this one
	// (ErrLockLost).
	KindLockLost
	// KindStoreUnavailable: the ledger could not be reached or used
	// (ErrStore); the method did not run, or its outcome is settled by a
	// retry.
	KindStoreUnavailable
	// KindOutcomeUnknown: the method ran but its outcome could not be
	// recorded (ErrOutcomeNotRecorded without ErrStore); every retry of the
	// key replays this answer.
	KindOutcomeUnknown
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the reasons
// [Kind.Reason] returns: the module path of this project, which owns them.
const ErrorDomain = "github.com/idemgen/idemgen"

// Reason returns the google.rpc.ErrorInfo reason of k, UPPER_SNAKE_CASE as
// AIP-193 asks and stable across releases, or "" for KindOther and
// KindReplayed (the application's errors). Each names the same problem as
// runtime/idemhttp's problem type of the same kind.
func (k Kind) Reason() string {
	switch k {
	case KindNoKey:
		return "IDEMPOTENCY_KEY_MISSING"
	case KindInvalidKey:
		return "IDEMPOTENCY_KEY_INVALID"
	case KindInvalidScope:
		return "IDEMPOTENCY_SCOPE_UNKNOWN"
	case KindMismatch:
		return "IDEMPOTENCY_KEY_REUSED"
	case KindInProgress:
		return "IDEMPOTENCY_KEY_IN_PROGRESS"
	case KindLockLost:
		return "IDEMPOTENCY_LOCK_LOST"
	case KindStoreUnavailable:
		return "IDEMPOTENCY_LEDGER_UNAVAILABLE"
	case KindOutcomeUnknown:
		return "IDEMPOTENCY_OUTCOME_UNKNOWN"
	}
	return ""
}

// String returns the Go name of k, e.g. "KindMismatch".
func (k Kind) String() string {
	names := [...]string{"KindOther", "KindReplayed", "KindNoKey", "KindInvalidKey", "KindInvalidScope",
		"KindMismatch", "KindInProgress", "KindLockLost", "KindStoreUnavailable", "KindOutcomeUnknown"}
	if k < 0 || int(k) >= len(names) {
		return "Kind(?)"
	}
	return names[k]
}

// Class is what [Classify] reads from an error.
type Class struct {
	Kind Kind
	// RetryAfter is how long the caller should wait before retrying with
	// the same key and request: the in-progress error's RetryAfter, at least
	// 1s, for KindInProgress; 1s for KindLockLost; 0 otherwise (retry with
	// a backoff of the caller's own where the kind is not Final).
	RetryAfter time.Duration
	// Final reports that every retry of the same request with the same key
	// gets this answer again: the caller must change something (a new key,
	// another request, its credentials) or stop. It is false for the kinds
	// a retry settles (in progress, lock lost, ledger unavailable) and for
	// KindOther, which the runtime cannot judge. KindReplayed is final.
	Final bool
	// Reason is the *KeyError's or *ScopeError's reason with every byte
	// outside printable ASCII replaced by '?', "" for the other kinds. It
	// never holds the key or the scope.
	Reason string
}

// Classify returns the class of err, an error returned by an idempotent call
// or by the validation of its key or scope, wrapped or not. The first rule
// that matches wins, in this order: mismatch, in progress, lock lost,
// invalid key, no key, invalid scope, outcome unknown (unless the ledger is
// unavailable too), ledger unavailable, a replayed final error, and
// KindOther for anything else (nil included).
func Classify(err error) Class {
	if err == nil {
		return Class{Kind: KindOther}
	}
	var (
		inProgress *InProgressError
		keyErr     *KeyError
		scopeErr   *ScopeError
		replayed   *ReplayedError
	)
	switch {
	case errors.Is(err, ErrMismatch):
		return Class{Kind: KindMismatch, Final: true}
	case errors.As(err, &inProgress) || errors.Is(err, ErrInProgress):
		d := time.Second
		if inProgress != nil {
			d = max(d, inProgress.RetryAfter)
		}
		return Class{Kind: KindInProgress, RetryAfter: d}
	case errors.Is(err, ErrLockLost):
		return Class{Kind: KindLockLost, RetryAfter: time.Second}
	case errors.As(err, &keyErr) || errors.Is(err, ErrInvalidKey):
		c := Class{Kind: KindInvalidKey, Final: true}
		if keyErr != nil {
			c.Reason = printable(keyErr.Reason)
		}
		return c
	case errors.Is(err, ErrNoKey):
		return Class{Kind: KindNoKey, Final: true}
	case errors.As(err, &scopeErr) || errors.Is(err, ErrInvalidScope):
		c := Class{Kind: KindInvalidScope, Final: true}
		if scopeErr != nil {
			c.Reason = printable(scopeErr.Reason)
		}
		return c
	case errors.Is(err, ErrOutcomeNotRecorded) && !errors.Is(err, ErrStore):
		return Class{Kind: KindOutcomeUnknown, Final: true}
	case errors.Is(err, ErrStore):
		return Class{Kind: KindStoreUnavailable}
	case errors.As(err, &replayed):
		return Class{Kind: KindReplayed, Final: true}
	}
	return Class{Kind: KindOther}
}

// printable replaces every byte outside printable ASCII with '?', so a reason
// can never carry control characters or raw bytes into an answer.
func printable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
