package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StartJanitor checks its arguments, then runs Janitor in a new goroutine
// until ctx ends. An interval that is not positive is an error here, before
// anything starts, rather than a goroutine that silently returns at once.
// The returned channel is closed once the janitor has stopped.
func (s *Store) StartJanitor(ctx context.Context, interval time.Duration, batch int) (stopped <-chan struct{}, err error) {
	if interval <= 0 {
		return nil, fmt.Errorf("idem: StartJanitor: interval must be positive (got %s)", interval)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Janitor(ctx, interval, batch) // its only error is the interval, checked above
	}()
	return done, nil
}

// RegisterInline adds the inline-mode method m to what s's janitor sweeps:
// every Janitor (and StartJanitor) round, after the ledger's expired rows,
// takes the expired keys off m's table with SweepInline, paced by the same
// sweep share (WithSweepShare). The generated NewIdempotent<T> constructor
// calls it for each inline method, so one StartJanitor sweeps every mode;
// call it yourself only for an InlineMethod you declared by hand.
//
// Registering a method again (another wrapper over the same store) is a
// no-op; it is keyed by m.Name. It cannot fail, so a constructor can call it:
// a method whose table name is not a valid identifier (which the generator
// never writes) fails its sweeps instead, each with an error naming it, which
// the janitor logs.
func RegisterInline[R any](s *Store, m *InlineMethod[R]) {
	r := s.inline
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sweep[m.Name]; ok {
		return
	}
	if r.sweep == nil {
		r.sweep = map[string]func(context.Context, int) (int64, error){}
	}
	r.names = append(r.names, m.Name)
	r.sweep[m.Name] = func(ctx context.Context, batch int) (int64, error) { return SweepInline(ctx, s, m, batch) }
}

// InlineRegistered returns the names of the inline methods registered with
// s (RegisterInline), in registration order.
func (s *Store) InlineRegistered() []string {
	s.inline.mu.Lock()
	defer s.inline.mu.Unlock()
	return slices.Clone(s.inline.names)
}

// SweepAll runs Sweep over the ledger, then SweepInline over every
// registered inline method, and returns the rows deleted or cleared in all.
// Every sweep runs even when one before it fails; the errors are joined. A
// ledger table that does not exist is not an error when inline methods are
// registered (a service whose methods are all inline has no ledger).
func (s *Store) SweepAll(ctx context.Context, batch int) (int64, error) {
	total, err := s.Sweep(ctx, batch)
	names := s.InlineRegistered()
	var pgErr *pgconn.PgError
	if len(names) > 0 && errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		err = nil
	}
	errs := []error{err}
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		s.inline.mu.Lock()
		sweep := s.inline.sweep[name]
		s.inline.mu.Unlock()
		n, err := sweep(ctx, batch)
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// Janitor runs SweepAll every interval until ctx ends (the ledger, then every
// inline method registered with RegisterInline), logging failures, and
// returns nil when ctx ends. Run one per deployment (several are harmless:
// SKIP LOCKED keeps them out of each other's way).
func (s *Store) Janitor(ctx context.Context, interval time.Duration, batch int) error {
	if interval <= 0 {
		return errors.New("idem: Janitor: interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.SweepAll(ctx, batch)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.cfg.logger.ErrorContext(ctx, "idempotency ledger sweep failed", "err", err, "deleted", n)
		case n > 0:
			s.cfg.logger.InfoContext(ctx, "idempotency ledger swept", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
