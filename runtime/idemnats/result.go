package idemnats

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Action is how a Handler settled a message with the server.
type Action int

const (
	// Ack: the call succeeded, replayed a stored response, or answered a
	// final error (stored, or replayed). The server never delivers the
	// message again.
	Ack Action = iota + 1
	// Nak: the call may succeed later (the key is in progress, the ledger or
	// the method failed); the server delivers the message again after Delay.
	Nak
	// Term: no delivery of the message can ever succeed (it cannot be
	// decoded, its key is invalid or names another request); the server
	// never delivers it again, and the Handler reports it.
	Term
	// InProgress: the delivery is a copy of a message this Handler is
	// still running (the server delivered it again, its AckWait having
	// passed): the Handler told the server the message is in progress
	// (InProgress) and left it to the running delivery, whose settle
	// settles the message. The call does not run; Err is
	// ErrDeliveryInFlight.
	InProgress
)

// String returns the action's Go name.
func (a Action) String() string {
	switch a {
	case Ack:
		return "Ack"
	case Nak:
		return "Nak"
	case Term:
		return "Term"
	case InProgress:
		return "InProgress"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Result is what a Handler did with one message.
type Result struct {
	Action Action
	// Delay is how long the server waits before delivering the message
	// again (Nak only).
	Delay time.Duration
	// Source is where the key came from (0 when the message was refused
	// before a key was chosen), Key the key, Scope the scope. FromRequest
	// is reported when the wrapper keyed the call by its request field
	// (-key); Key is then the field's value as the call read it.
	Source KeySource
	Key    string
	Scope  string
	// Replayed reports that the wrapper answered from the ledger without
	// running the method (idem.Outcome).
	Replayed bool
	// Err is the call's or the decoder's error, nil on success.
	Err error
	// SettleErr is the error of Ack, Nak or Term: the server may not have
	// got it, and then delivers the message again after AckWait (where the
	// ledger answers it as a retry).
	SettleErr error
}

// ErrDeliveryInFlight is the error of a delivery answered with InProgress:
// an earlier delivery of the same message runs in this Handler. It matches
// idem.ErrInProgress.
var ErrDeliveryInFlight = fmt.Errorf("idemnats: %w: an earlier delivery of the message runs in this handler", idem.ErrInProgress)

// ErrNoKeySource is the error a message is terminated with when none of the
// configured sources gives it a key.
var ErrNoKeySource = errors.New("idemnats: the message has no idempotency key in any configured source")

// DecodeError is the error of a message whose request cannot be decoded: a
// poison message, terminated.
type DecodeError struct{ Err error }

// Error says the request cannot be decoded, and why.
func (e *DecodeError) Error() string {
	return "idemnats: the request cannot be decoded: " + e.Err.Error()
}

// Unwrap returns the decoder's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// termReason is the reason a terminated message's advisory carries: a
// fixed text per cause, never the request or the key.
func termReason(err error) string {
	var dec *DecodeError
	switch {
	case errors.As(err, &dec):
		return "idemnats: request cannot be decoded"
	case errors.Is(err, idem.ErrMismatch):
		return "idemnats: idempotency key reused with a different request"
	case errors.Is(err, idem.ErrInvalidKey), errors.Is(err, idem.ErrNoKey), errors.Is(err, ErrNoKeySource):
		return "idemnats: no valid idempotency key"
	case errors.Is(err, idem.ErrInvalidScope):
		return "idemnats: invalid idempotency scope"
	case errors.Is(err, idem.ErrOutcomeNotRecorded):
		return "idemnats: the call ran but its outcome could not be recorded"
	}
	return "idemnats: terminated"
}
