package idemnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgen/idemgen/runtime/idem"
)

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
