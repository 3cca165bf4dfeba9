package idemnats

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// HeaderMsgID is the header a publisher sets to name a message
// (jetstream.WithMsgID); JetStream drops a second message with the same ID
// published within the stream's duplicate window.
const HeaderMsgID = "Nats-Msg-Id"

// KeySource names where a message's idempotency key comes from.
type KeySource int

const (
	// FromMsgID takes the key from the message's Nats-Msg-Id header. It is
	// skipped for a message without one.
	FromMsgID KeySource = iota + 1
	// FromRequest lets a wrapper generated with -key take the key from the
	// request field the directive names: the sources listed after it give
	// only the context's fallback key (idem.ContextWithFallbackKey), which
	// that field replaces, so they key the calls of wrappers without -key.
	// With Config.RequestKey set, the Handler reads the field itself and
	// skips this source for a request whose field is "".
	FromRequest
	// FromSequence takes the key from the stream's name and the message's
	// stream sequence, "nats-seq:STREAM:SEQ". Every JetStream message has
	// one, so a source listed after it is never reached.
	FromSequence
)

// String returns the source's Go name, "none" for the zero value (no
// source chosen).
func (k KeySource) String() string {
	switch k {
	case 0:
		return "none"
	case FromMsgID:
		return "FromMsgID"
	case FromRequest:
		return "FromRequest"
	case FromSequence:
		return "FromSequence"
	}
	return "KeySource(" + strconv.Itoa(int(k)) + ")"
}

// DefaultKeys returns the order in which a Handler looks for a message's
// key unless Config.Keys says otherwise: FromRequest, FromMsgID,
// FromSequence. A wrapper generated with -key is then keyed by its request
// field, whatever message ID the publisher chose; a wrapper without one by
// the Nats-Msg-Id header, else by the stream sequence.
func DefaultKeys() []KeySource { return []KeySource{FromRequest, FromMsgID, FromSequence} }

// Config configures a Handler. The zero value takes keys in DefaultKeys
// order, decodes JSON and scopes keys by stream and consumer.
type Config[Req any] struct {
	// Decode returns the request a message carries. nil decodes the
	// message's data as JSON. An error makes the message poison: it is
	// terminated and reported, never delivered again.
	Decode func(msg jetstream.Msg) (Req, error)

	// Keys is the order in which the key is looked for; nil means
	// DefaultKeys. The first source the message has wins; FromRequest wins
	// for wrappers generated with -key only (see FromRequest).
	Keys []KeySource

	// RequestKey, optional, returns the value of the request field the
	// wrapper's -key directive names ("" when the request does not set
	// it). nil leaves the choice to the wrapper, which knows its field:
	// the usual setting. Set, it makes FromRequest the Handler's own
	// choice: a request whose field is "" is keyed by the next source
	// instead of being refused as an empty key.
	RequestKey func(req Req) string

	// Scope returns the scope of a message's key. nil means DefaultScope:
	// the stream's and the consumer's names. An error or an invalid scope
	// terminates the message.
	Scope func(msg jetstream.Msg) (string, error)

	// FinalErrors lists the sentinels the method declares final
	// (-final-errors): an error that matches one (errors.Is) was stored
	// with the key, so the message is acked. An unlisted final error is
	// nakked once, and its next delivery replays it as an
	// *idem.ReplayedError, which is acked.
	FinalErrors []error

	// Backoff returns how long to wait before the next delivery of a
	// message that failed for the delivered-th time (1 on the first
	// delivery) with an error a retry may settle. nil means DefaultBackoff.
	Backoff func(delivered uint64) time.Duration

	// Timeout bounds each call; 0 means no bound beyond the context given
	// to Handle. Keep it below the consumer's AckWait, or send progress
	// (Progress) for longer calls.
	Timeout time.Duration

	// Progress, if positive, tells the server every Progress that the
	// message is still being worked on (jetstream.Msg.InProgress) while the
	// call runs, and while the message waits for one of Concurrency's
	// slots, so that it is not delivered again meanwhile however long that
	// takes. Keep it well below AckWait.
	Progress time.Duration

	// Concurrency is how many calls the function Func returns runs at
	// once. 0 or 1: one at a time, in the goroutine Consume calls it from,
	// so that messages Consume has pulled wait in its buffer, aging toward
	// AckWait without progress. Above 1: Func's function takes each
	// message at once and runs it in a goroutine of its own as soon as
	// fewer than Concurrency calls run; a message waiting for its turn
	// sends InProgress every Progress, which must then be set (NewHandler
	// panics with ErrConcurrencyWithoutProgress otherwise). The consumer's
	// MaxAckPending bounds how many messages the process holds (running or
	// waiting): the server delivers no more while that many are
	// unacknowledged. Handle itself always runs its message at once.
	Concurrency int

	// Logger receives a record for every terminated message (level Error)
	// and every failed Ack, Nak or Term (level Warn); nil means
	// slog.Default().
	Logger *slog.Logger

	// OnTerm, if set, is called for every message the Handler terminates,
	// with the reason (the decoder's or the call's error).
	OnTerm func(ctx context.Context, msg jetstream.Msg, r Result)

	// OnSettle, if set, is called for every message once it is settled,
	// whatever the action. It must be quick and must not panic.
	OnSettle func(ctx context.Context, msg jetstream.Msg, r Result)
}

// DefaultScope returns the scope of a message unless Config.Scope says
// otherwise: its stream's and its consumer's names, "STREAM/CONSUMER". Keys
// are then kept per durable consumer: an ephemeral consumer gets a new name
// each time it is made, so its keys would not survive it.
func DefaultScope(msg jetstream.Msg) (string, error) {
	md, err := msg.Metadata()
	if err != nil {
		return "", err
	}
	return md.Stream + "/" + md.Consumer, nil
}

// DefaultBackoff waits 1s after a first failed delivery, doubling up to 1
// minute, each delay drawn between half and all of that (so that messages
// failed together are not all delivered again together).
func DefaultBackoff(delivered uint64) time.Duration {
	d := time.Minute
	if delivered < 7 {
		d = time.Second << max(delivered, 1) / 2
	}
	return d/2 + rand.N(d/2+1)
}

// ErrNoRequestKey was the panic value of NewHandler when Config.Keys
// listed FromRequest without Config.RequestKey.
//
// Deprecated: FromRequest no longer needs Config.RequestKey (the wrapper
// says whether it takes its key from the request), and NewHandler no longer
// panics with it.
var ErrNoRequestKey = errors.New("idemnats: NewHandler: Config.Keys lists FromRequest: set Config.RequestKey to the function " +
	"that returns the request field the method's -key directive names")

// ErrConcurrencyWithoutProgress is the panic value of NewHandler when
// Config.Concurrency is above 1 and Config.Progress is not set: messages
// waiting for a slot would age toward AckWait unnoticed.
var ErrConcurrencyWithoutProgress = errors.New("idemnats: NewHandler: Config.Concurrency is above 1: set Config.Progress below the consumer's AckWait, " +
	"so that the messages waiting for a slot are not delivered again while they wait")
