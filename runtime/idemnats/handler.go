package idemnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/runtime/idem"
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

// ErrDeliveryInFlight is the error of a delivery answered with InProgress:
// an earlier delivery of the same message runs in this Handler. It matches
// idem.ErrInProgress.
var ErrDeliveryInFlight = fmt.Errorf("idemnats: %w: an earlier delivery of the message runs in this handler", idem.ErrInProgress)

// ErrNoKeySource is the error a message is terminated with when none of the
// configured sources gives it a key.
var ErrNoKeySource = errors.New("idemnats: the message has no idempotency key in any configured source")

// Handler calls a generated wrapper's method for each JetStream message and
// settles the message with the server from the answer. It is safe for
// concurrent use; with Config.Concurrency above 1 its callbacks (OnTerm,
// OnSettle, Decode, Scope) are called concurrently.
type Handler[Req, Resp any] struct {
	call    func(context.Context, Req) (Resp, error)
	cfg     Config[Req]
	keys    []KeySource
	logger  *slog.Logger
	backoff func(uint64) time.Duration
	scope   func(jetstream.Msg) (string, error)
	slots   chan struct{}  // one per call running, Concurrency above 1
	taken   sync.WaitGroup // messages Func's function took and has not settled

	mu       sync.Mutex
	inFlight map[delivery]struct{} // messages taken and not settled yet
}

// delivery names a message of a consumer, whichever time it is delivered.
type delivery struct {
	stream, consumer string
	seq              uint64
}

// NewHandler returns a Handler that calls call, a generated wrapper's method
// such as (*IdempotentPayments).Charge bound to its wrapper, for every
// message. It panics on a KeySource it does not know, and with
// ErrConcurrencyWithoutProgress: wiring mistakes that must stop the
// consumer at start-up.
func NewHandler[Req, Resp any](call func(ctx context.Context, req Req) (Resp, error), cfg Config[Req]) *Handler[Req, Resp] {
	h := &Handler[Req, Resp]{call: call, cfg: cfg, keys: cfg.Keys, logger: cfg.Logger, backoff: cfg.Backoff, scope: cfg.Scope,
		inFlight: map[delivery]struct{}{}}
	if h.keys == nil {
		h.keys = DefaultKeys()
	}
	for _, k := range h.keys {
		switch k {
		case FromMsgID, FromSequence, FromRequest:
		default:
			panic(fmt.Errorf("idemnats: NewHandler: unknown key source %s", k))
		}
	}
	if cfg.Concurrency > 1 {
		if cfg.Progress <= 0 {
			panic(ErrConcurrencyWithoutProgress)
		}
		h.slots = make(chan struct{}, cfg.Concurrency)
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if h.backoff == nil {
		h.backoff = DefaultBackoff
	}
	if h.scope == nil {
		h.scope = DefaultScope
	}
	return h
}

// Func returns a jetstream.MessageHandler for Consume that handles each
// message as Handle does, every call made with ctx (cancel it to cut the
// calls short when the consumer stops). With Config.Concurrency above 1 it
// returns at once and the message runs in a goroutine of its own when a
// slot is free, sending InProgress while it waits; a message still waiting
// when ctx ends is nakked, for the server to deliver again. Wait waits for
// those goroutines.
func (h *Handler[Req, Resp]) Func(ctx context.Context) jetstream.MessageHandler {
	if h.slots == nil {
		return func(msg jetstream.Msg) { h.Handle(ctx, msg) }
	}
	return func(msg jetstream.Msg) {
		h.taken.Add(1)
		go func() {
			defer h.taken.Done()
			h.handleInTurn(ctx, msg)
		}()
	}
}

// Wait returns once every message the functions Func returned have taken
// is settled (Config.Concurrency above 1; at once otherwise). Call it after
// stopping the consumer (jetstream.ConsumeContext's Stop or Drain), before
// closing what the calls use.
func (h *Handler[Req, Resp]) Wait() { h.taken.Wait() }

// handleInTurn handles msg once fewer than Config.Concurrency calls run,
// telling the server it is in progress from now until it is settled.
func (h *Handler[Req, Resp]) handleInTurn(ctx context.Context, msg jetstream.Msg) {
	release, first := h.take(msg)
	if !first {
		h.copyInFlight(ctx, msg)
		return
	}
	defer release()
	stop := h.progress(msg)
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		stop()
		if err := msg.Nak(); err != nil {
			h.logger.WarnContext(ctx, "idemnats: the server may not have got the Nak of a message left waiting when the consumer stopped; "+
				"it will deliver the message again after AckWait", "subject", msg.Subject(), "error", err)
		}
		return
	}
	defer func() { <-h.slots }()
	h.handle(ctx, msg, stop)
}

// Handle processes one message: it decodes the request, picks its key and
// scope, calls the wrapper and settles the message (Ack, Nak or Term), and
// returns what it did. A delivery of a message this Handler is still
// running (in another goroutine) is answered with InProgress instead,
// without calling the wrapper.
func (h *Handler[Req, Resp]) Handle(ctx context.Context, msg jetstream.Msg) Result {
	release, first := h.take(msg)
	if !first {
		return h.copyInFlight(ctx, msg)
	}
	defer release()
	return h.handle(ctx, msg, nil)
}

// take marks msg's message in flight until release is called; first is
// false, and release nil, when it already was: msg is a copy the server
// delivered again while this Handler runs the message.
func (h *Handler[Req, Resp]) take(msg jetstream.Msg) (release func(), first bool) {
	md, err := msg.Metadata()
	if err != nil {
		return func() {}, true // not a JetStream message: process terminates it
	}
	d := delivery{stream: md.Stream, consumer: md.Consumer, seq: md.Sequence.Stream}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.inFlight[d]; ok {
		return nil, false
	}
	h.inFlight[d] = struct{}{}
	return func() {
		h.mu.Lock()
		delete(h.inFlight, d)
		h.mu.Unlock()
	}, true
}

// copyInFlight answers a copy of a message this Handler runs: the server
// is told the message is in progress (which restarts its AckWait), and the
// running delivery's settle settles it.
func (h *Handler[Req, Resp]) copyInFlight(ctx context.Context, msg jetstream.Msg) Result {
	r := Result{Action: InProgress, Err: ErrDeliveryInFlight, SettleErr: msg.InProgress()}
	if r.SettleErr != nil {
		h.logger.WarnContext(ctx, "idemnats: the server may not have got the InProgress of a message delivered again while it runs; "+
			"it will deliver the message again after AckWait", "subject", msg.Subject(), "error", r.SettleErr)
	}
	if h.cfg.OnSettle != nil {
		h.cfg.OnSettle(ctx, msg, r)
	}
	return r
}

// handle is Handle; stopProgress, if not nil, stops the InProgress signals
// already being sent for msg (otherwise handle sends its own while the call
// runs, Config.Progress).
func (h *Handler[Req, Resp]) handle(ctx context.Context, msg jetstream.Msg, stopProgress func()) Result {
	if stopProgress == nil && h.cfg.Progress > 0 {
		stopProgress = h.progress(msg)
	}
	r := h.process(ctx, msg)
	if stopProgress != nil {
		stopProgress() // none may follow the settle
	}
	switch r.Action {
	case Ack:
		r.SettleErr = msg.Ack()
	case Nak:
		r.SettleErr = msg.NakWithDelay(r.Delay)
	case Term:
		r.SettleErr = msg.TermWithReason(termReason(r.Err))
		h.logger.ErrorContext(ctx, "idemnats: message terminated, it will not be delivered again",
			"subject", msg.Subject(), "source", r.Source.String(), "key", r.Key, "scope", r.Scope, "error", r.Err)
		if h.cfg.OnTerm != nil {
			h.cfg.OnTerm(ctx, msg, r)
		}
	}
	if r.SettleErr != nil {
		h.logger.WarnContext(ctx, "idemnats: the server may not have got the message's "+r.Action.String()+
			"; it will deliver the message again after AckWait", "subject", msg.Subject(), "error", r.SettleErr)
	}
	if h.cfg.OnSettle != nil {
		h.cfg.OnSettle(ctx, msg, r)
	}
	return r
}

// process decides a message's Result without settling it.
func (h *Handler[Req, Resp]) process(ctx context.Context, msg jetstream.Msg) Result {
	md, err := msg.Metadata()
	if err != nil {
		return Result{Action: Term, Err: fmt.Errorf("idemnats: not a JetStream message: %w", err)}
	}
	req, err := h.decode(msg)
	if err != nil {
		return Result{Action: Term, Err: &DecodeError{Err: err}}
	}
	r := Result{}
	if r.Scope, err = h.scope(msg); err != nil {
		r.Action, r.Err = Term, fmt.Errorf("idemnats: scope: %w", err)
		return r
	}
	if err := idem.ValidateScope(r.Scope); err != nil {
		r.Action, r.Err = Term, fmt.Errorf("idemnats: scope: %w", err)
		return r
	}
	var byWrapper bool
	r.Source, r.Key, byWrapper = h.key(msg, md, req)
	if r.Source == 0 && !byWrapper {
		r.Action, r.Err = Term, ErrNoKeySource
		return r
	}
	ctx = idem.ContextWithScope(ctx, r.Scope)
	switch {
	case byWrapper && r.Source != 0:
		ctx = idem.ContextWithFallbackKey(ctx, r.Key)
	case !byWrapper && r.Source != FromRequest:
		ctx = idem.ContextWithKey(ctx, r.Key)
	}
	if md.NumDelivered > 1 {
		// A redelivery: the call looks its key up before its body runs
		// (idem.ContextWithRetry). It changes what the call costs, never
		// what it answers.
		ctx = idem.ContextWithRetry(ctx)
	}
	ctx, outcome := idem.ContextWithOutcome(ctx)
	if h.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.cfg.Timeout)
		defer cancel()
	}
	_, r.Err = h.call(ctx, req)
	r.Replayed = outcome.Replayed()
	if key, fallback := outcome.Key(); byWrapper && !fallback {
		r.Source, r.Key = FromRequest, key // the wrapper's -key field replaced the fallback
	}
	r.Action, r.Delay = h.settle(r.Err, md.NumDelivered)
	return r
}

// decode returns the request msg carries.
func (h *Handler[Req, Resp]) decode(msg jetstream.Msg) (Req, error) {
	if h.cfg.Decode != nil {
		return h.cfg.Decode(msg)
	}
	var req Req
	err := json.Unmarshal(msg.Data(), &req)
	return req, err
}

// key returns the first source in h.keys that msg has, and its key. When
// FromRequest comes first and the wrapper decides it (Config.RequestKey
// is nil), byWrapper is true and the source returned, if any, is the first
// one after it: the fallback key, which the wrapper's -key field replaces.
func (h *Handler[Req, Resp]) key(msg jetstream.Msg, md *jetstream.MsgMetadata, req Req) (src KeySource, key string, byWrapper bool) {
	for _, k := range h.keys {
		switch k {
		case FromMsgID:
			if id := msg.Headers().Get(HeaderMsgID); id != "" {
				return k, id, byWrapper
			}
		case FromRequest:
			if h.cfg.RequestKey == nil {
				byWrapper = true
			} else if v := h.cfg.RequestKey(req); v != "" && !byWrapper {
				return k, v, false
			}
		case FromSequence:
			return k, "nats-seq:" + md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10), byWrapper
		}
	}
	return 0, "", byWrapper
}

// settle maps the call's error to the action that settles its message.
func (h *Handler[Req, Resp]) settle(err error, delivered uint64) (Action, time.Duration) {
	var (
		inProgress *idem.InProgressError
		replayed   *idem.ReplayedError
	)
	switch {
	case err == nil:
		return Ack, 0
	case errors.As(err, &inProgress):
		return Nak, max(inProgress.RetryAfter, time.Second)
	case errors.Is(err, idem.ErrInProgress), errors.Is(err, idem.ErrLockLost):
		return Nak, time.Second
	case errors.Is(err, idem.ErrStore):
		// The ledger could not be reached, or a commit may not have
		// reached the standby: a later delivery settles it.
		return Nak, h.backoff(delivered)
	case errors.Is(err, idem.ErrMismatch), errors.Is(err, idem.ErrInvalidKey), errors.Is(err, idem.ErrNoKey),
		errors.Is(err, idem.ErrInvalidScope), errors.Is(err, idem.ErrOutcomeNotRecorded):
		// Every delivery would get this answer again.
		return Term, 0
	case errors.As(err, &replayed):
		return Ack, 0
	}
	for _, f := range h.cfg.FinalErrors {
		if errors.Is(err, f) {
			return Ack, 0
		}
	}
	return Nak, h.backoff(delivered)
}

// progress sends InProgress every cfg.Progress until the returned function
// is called; that function returns once no InProgress can be sent any more,
// so none follows the message's settle.
func (h *Handler[Req, Resp]) progress(msg jetstream.Msg) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(h.cfg.Progress)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

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
