package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Settling a claim that lost: a key another request holds is answered from
// the row that holds it, a replay of its stored outcome, a mismatch, or in
// progress. settle answers from the ledger's row (atomic and external
// modes), inlineSettle from the lookup of the business row (inline mode).

// settle turns a row held by another request into the caller's answer: the
// stored response, a mismatch, or in progress. replayed reports a replay.
func settle[R any](ctx context.Context, s *Store, m *Method[R], c call, r ledgerRow) (R, error) {
	var zero R
	if string(r.fingerprint) != string(c.fp) {
		s.hook(ctx, s.cfg.hooks.Mismatch, c.event())
		s.cfg.logger.WarnContext(ctx, "idempotency key reused with a different request",
			"method", c.method, "scope", c.scope, "key", c.key,
			"stored", shortHex(r.fingerprint), "got", shortHex(c.fp))
		return zero, &MismatchError{Method: c.method, Key: c.key, Stored: r.fingerprint, Got: c.fp}
	}
	if r.status != StatusDone {
		lockLeft := time.Second
		if r.lockedUntil != nil {
			lockLeft = r.lockedUntil.Sub(r.now)
		}
		retry := s.recent.retryAfter(c.method, lockLeft)
		s.hook(ctx, s.cfg.hooks.InProgress, c.event())
		return zero, &InProgressError{Method: c.method, Key: c.key, RetryAfter: retry}
	}
	setReplayed(ctx, true)
	s.hook(ctx, s.cfg.hooks.Replayed, c.event())
	if r.errName != nil {
		return zero, replayError(m, *r.errName, deref(r.errMsg))
	}
	out, err := decode(m, r.response)
	if err != nil {
		return zero, fmt.Errorf("idem: %s: decode stored response for key %q: %w", c.method, c.key, err)
	}
	return out, nil
}

// replaysOutcome reports whether settle answers r with the outcome it
// stores: the row is done and holds this request.
func replaysOutcome(r ledgerRow, c call) bool {
	return r.status == StatusDone && string(r.fingerprint) == string(c.fp)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func replayError[R any](m *Method[R], name, msg string) error {
	if name == unrecordedName {
		return &ReplayedError{Name: name, Msg: msg, Sentinel: ErrOutcomeNotRecorded}
	}
	for _, f := range m.FinalErrors {
		if f.Name == name {
			return &ReplayedError{Name: name, Msg: msg, Sentinel: f.Err}
		}
	}
	return &ReplayedError{Name: name, Msg: msg}
}

// inlineSettle turns the lookup's answer after a refused claim into the
// caller's: freed reports that the key had expired and was taken off its
// old row (claim it anew); then the row's response, or a mismatch. confirm
// runs before the row is replayed (see replication.go).
func inlineSettle[R any](ctx context.Context, s *Store, c call, out R, stored []byte, lerr error, freed bool, confirm func(context.Context) error) (R, error) {
	var zero R
	if freed {
		s.hook(ctx, s.cfg.hooks.TakenOver, c.event())
		return zero, fmt.Errorf("idem: %s: %w", c.method, errKeyFreed)
	}
	if errors.Is(lerr, pgx.ErrNoRows) {
		// The holder rolled back, or the key was swept, in between.
		return zero, fmt.Errorf("idem: %s: %w", c.method, errRowVanished)
	}
	if lerr != nil {
		return zero, storeErr(c.method, "look up the row holding the key", lerr)
	}
	if string(stored) != string(c.fp) {
		s.hook(ctx, s.cfg.hooks.Mismatch, c.event())
		s.cfg.logger.WarnContext(ctx, "idempotency key reused with a different request",
			"method", c.method, "scope", c.scope, "key", c.key,
			"stored", shortHex(stored), "got", shortHex(c.fp))
		return zero, &MismatchError{Method: c.method, Key: c.key, Stored: stored, Got: c.fp}
	}
	if err := confirm(ctx); err != nil {
		return zero, err
	}
	setReplayed(ctx, true)
	s.hook(ctx, s.cfg.hooks.Replayed, c.event())
	return out, nil
}
