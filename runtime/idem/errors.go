package idem

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNoKey is returned when the context carries no idempotency key.
	ErrNoKey = errors.New("idem: no idempotency key in context")
	// ErrInvalidKey is returned (wrapped in a *KeyError) when a key fails validation.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")
	// ErrInvalidScope is returned (wrapped in a *ScopeError) when the scope in
	// the context cannot be stored: not UTF-8, a NUL byte, or too long. It is
	// the server's own input (the tenant), so an HTTP layer answers it as a
	// refused request, never as the ledger being unavailable.
	ErrInvalidScope = errors.New("idem: invalid idempotency scope")
	// ErrMismatch is returned (wrapped in a *MismatchError) when a key is reused
	// with a request whose fingerprint differs from the one stored. In ledger
	// modes the refusal is recorded on the key's row (its time and the
	// refused fingerprint, which idemledger inspect shows); a record that
	// fails is logged and changes no answer.
	ErrMismatch = errors.New("idem: idempotency key reused with a different request")
	// ErrInProgress is returned (wrapped in an *InProgressError) when another
	// attempt holds the key's in-progress claim.
	ErrInProgress = errors.New("idem: request with this idempotency key is in progress")
	// ErrLockLost is returned when an external-mode attempt tries to finalise
	// after its claim expired and another attempt took the key over. The stored
	// result of the attempt that took over is never overwritten.
	ErrLockLost = errors.New("idem: in-progress claim lost to another attempt")
	// ErrOutcomeNotRecorded is returned, and replayed, when an external-mode
	// method ran (so its side effects may have happened) but its outcome
	// could not be stored: a response that cannot be encoded, a step result
	// the ledger cannot hold, a write the database refused. The key is never
	// made runnable again by such a failure: it answers with this error
	// until its retention ends. Treat it as "the result is unknown": check
	// with the third party (for example by the DownstreamKey it was sent)
	// before trying again under a new key.
	//
	// It is also returned, not stored and together with ErrStore (which
	// idemhttp answers as 503), when the COMMIT that carried an atomic or
	// inline call's work, or an external call's outcome, may have
	// committed on the primary without reaching a synchronous standby:
	// cut off by the finalise timeout, or answered with the server's
	// "might not have been replicated" warning. A retry under the same key
	// settles it: it replays the outcome once the standby has it (ErrStore
	// until then), or, after a failover that lost it, atomic and inline
	// calls run again (their work was lost with it).
	ErrOutcomeNotRecorded = errors.New("idem: the call ran but its outcome could not be recorded")
	// ErrStore wraps every failure to reach or use the ledger. The method body
	// does not run when the claim cannot be made (the store fails closed).
	ErrStore = errors.New("idem: ledger unavailable")
)

// KeyError describes why a key was rejected. errors.Is(err, ErrInvalidKey) holds.
type KeyError struct {
	// Reason says what is wrong, e.g. "longer than 255 bytes" or
	// "byte 3 (0x0a) is not a visible ASCII character". It never echoes the key.
	Reason string
}

// Error says why the key was rejected.
func (e *KeyError) Error() string { return "idem: invalid idempotency key: " + e.Reason }

// Unwrap returns ErrInvalidKey.
func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// ScopeError describes why a scope was rejected. errors.Is(err,
// ErrInvalidScope) holds.
type ScopeError struct {
	// Reason says what is wrong, e.g. "not valid UTF-8". It never echoes
	// the scope.
	Reason string
}

// Error says why the scope was rejected.
func (e *ScopeError) Error() string { return "idem: invalid idempotency scope: " + e.Reason }

// Unwrap returns ErrInvalidScope.
func (e *ScopeError) Unwrap() error { return ErrInvalidScope }

// MismatchError reports a key reused with a different request.
// errors.Is(err, ErrMismatch) holds.
type MismatchError struct {
	Method string // the method name, e.g. "Payments.Charge"
	Key    string // the idempotency key (already validated: visible ASCII only)
	Stored []byte // fingerprint stored with the first request
	Got    []byte // fingerprint of this request
}

// Error names the method, the key and both fingerprints, and what to do.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("idem: %s: key %q was first used with request %s, now with %s; use a new key for a new request",
		e.Method, e.Key, shortHex(e.Stored), shortHex(e.Got))
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// InProgressError reports that another attempt holds the key.
// errors.Is(err, ErrInProgress) holds.
type InProgressError struct {
	Method string
	Key    string
	// RetryAfter is when a retry is likely to find the answer: the method's
	// typical duration (the 90th percentile of its last 16 bodies run by
	// this Store), capped by the time left on the holder's lock; the time
	// left on the lock when no duration is known. At least 1s; not rounded
	// (round up when sending it).
	RetryAfter time.Duration
}

// Error names the method and the key, and when to retry.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: %s: key %q is in progress; retry after %s", e.Method, e.Key, e.RetryAfter)
}

// Unwrap returns ErrInProgress.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// ReplayedError is the error a replay returns for a final error stored by the
// first attempt. Its message is the original message and errors.Is holds for
// the sentinel the method declared as final.
type ReplayedError struct {
	Name     string // the sentinel's name, e.g. "ErrCardDeclined"
	Msg      string // the original error's message
	Sentinel error  // the declared sentinel, nil if the name is no longer declared
}

// Error returns the original error's message.
func (e *ReplayedError) Error() string { return e.Msg }

// Unwrap returns the sentinel.
func (e *ReplayedError) Unwrap() error { return e.Sentinel }

// shortHex renders the first 6 bytes of a fingerprint as hex, for messages.
func shortHex(b []byte) string {
	const n = 6
	if len(b) > n {
		return fmt.Sprintf("%x…", b[:n])
	}
	return fmt.Sprintf("%x", b)
}

// The protocol's own sentinels, which tell retryAttempts (retry.go) that
// another attempt can settle a call.

// errRowVanished marks a claim that found the key held but no row to read
// (the holder rolled back or the row was swept in between): try again.
var errRowVanished = errors.New("idem: ledger row vanished between claim and read")

// errRecordRefused marks an atomic attempt's record statement that was
// refused (refusedRecord): a twin committed the key (or took it over) after
// the lookup. The COMMIT rolled the body's work back; the lookup that
// follows answers.
var errRecordRefused = errors.New("idem: the key was recorded by another request after the lookup")

// errKeyTaken marks the unique violation (23505) of the statement that
// stores a call's outcome, as finish returns it: the fresh record's plain
// INSERT met a row a twin committed since the lookup (ledger.RecordForms). A
// unique violation the COMMIT raises (a deferred constraint of the body's
// tables) is not marked.
var errKeyTaken = errors.New("idem: the key's row was committed by a twin after the lookup")

// errCommitUnknown marks a COMMIT whose outcome is unknown (the connection
// failed while it was in flight). The next attempt reads the ledger row and so
// settles it: the row is there (replay) or it is not (run again).
var errCommitUnknown = errors.New("idem: commit outcome unknown")

// errKeyFreed marks a refused claim whose key had expired and was taken off
// its old row: the next attempt claims it anew.
var errKeyFreed = errors.New("idem: expired key freed")

// errBodyEndedTx is returned by Commit and Rollback on the transaction handed
// to an atomic method body: idem ends that transaction itself, together with
// the stored response.
var errBodyEndedTx = errors.New("idem: the method body must not commit or roll back the transaction it is given; return an error to roll back")
