// Package idemotel turns the hooks of an idem.Store into OpenTelemetry spans
// and metrics:
//
//	tel, err := idemotel.New(otel.GetTracerProvider(), otel.GetMeterProvider())
//	if err != nil {
//		return err
//	}
//	store, err := idem.NewStore(pool, idem.WithHooks(tel.Hooks()))
//
// Spans, children of the span in the call's context (the HTTP server's, say):
//
//	idem.claim       the key was claimed (idem.takeover too when an expired or abandoned claim was taken over)
//	idem.body        the method body ran; it spans the body's measured duration, status Error when it failed
//	idem.replay      a stored response was returned
//	idem.mismatch    the key was reused with a different request (status Error)
//	idem.in_progress another attempt holds the key
//	idem.takeover    an expired or abandoned claim was taken over
//	idem.lock_lost   a finalise found its claim taken over (status Error)
//	idem.sweep       a sweep batch deleted rows
//
// with the attributes idem.method, idem.scope and idem.key (unless
// WithoutKeys), idem.fence for claims, error.type for a failed body and
// idem.sweep.rows for sweeps. The hooks run after the fact, so the body span
// is recorded when the body has returned, with its start set back by the
// measured duration; spans the body starts itself are its siblings, not its
// children.
//
// Metrics, each with the attribute idem.method (the method's ledger name,
// a bounded set) and never a key or a scope:
//
//	idem.outcomes        counter, {event}: one per hook, by idem.outcome (claimed, executed, replayed, mismatch, in_progress, taken_over, lock_lost)
//	idem.body.duration   histogram, s: how long bodies ran; error.type when one failed
//	idem.replay.ratio    gauge, 1: replays / (replays + claims) since the process started
//	idem.sweep.rows      counter, {row}: rows deleted by sweeps (no idem.method for the store-wide sweep)
//
// The package is a module of its own, so that the runtime, and every module
// that uses idemgen without OpenTelemetry, stays free of it.
package idemotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/runtime/idem"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/idemgen/idemgen/runtime/idemotel"

// Attribute keys, in the OpenTelemetry semantic conventions' style.
const (
	AttrMethod    = attribute.Key("idem.method")     // the method's ledger name, e.g. Payments.Charge
	AttrScope     = attribute.Key("idem.scope")      // the tenant scope (spans only)
	AttrKey       = attribute.Key("idem.key")        // the idempotency key (spans only)
	AttrFence     = attribute.Key("idem.fence")      // the claim's fencing token
	AttrOutcome   = attribute.Key("idem.outcome")    // what a hook reported (metrics)
	AttrSweepRows = attribute.Key("idem.sweep.rows") // rows a sweep batch deleted
	AttrErrorType = attribute.Key("error.type")      // the semantic conventions' error.type
)

// Outcomes, the values of idem.outcome.
const (
	OutcomeClaimed    = "claimed"
	OutcomeExecuted   = "executed"
	OutcomeReplayed   = "replayed"
	OutcomeMismatch   = "mismatch"
	OutcomeInProgress = "in_progress"
	OutcomeTakenOver  = "taken_over"
	OutcomeLockLost   = "lock_lost"
)

// Option configures New.
type Option func(*Telemetry)

// WithoutKeys leaves the key and the scope out of spans, for services whose
// keys or tenant names must not reach the tracing backend.
func WithoutKeys() Option { return func(t *Telemetry) { t.keys = false } }

// Telemetry records a store's hooks as spans and metrics. It is safe for
// concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	keys   bool

	outcomes  metric.Int64Counter
	duration  metric.Float64Histogram
	sweepRows metric.Int64Counter

	mu     sync.Mutex
	ratios map[string]*ratio // by method
}

// ratio counts what the replay ratio is computed from.
type ratio struct{ replays, claims int64 }

// New returns a Telemetry that records with tp's tracer and mp's meter.
func New(tp trace.TracerProvider, mp metric.MeterProvider, opts ...Option) (*Telemetry, error) {
	if tp == nil || mp == nil {
		return nil, errors.New("idemotel: New: nil tracer or meter provider")
	}
	t := &Telemetry{tracer: tp.Tracer(ScopeName), keys: true, ratios: map[string]*ratio{}}
	for _, o := range opts {
		o(t)
	}
	meter := mp.Meter(ScopeName)
	var err error
	if t.outcomes, err = meter.Int64Counter("idem.outcomes", metric.WithUnit("{event}"),
		metric.WithDescription("What idempotent calls did, by idem.outcome.")); err != nil {
		return nil, fmt.Errorf("idemotel: idem.outcomes: %w", err)
	}
	if t.duration, err = meter.Float64Histogram("idem.body.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the bodies of idempotent methods ran.")); err != nil {
		return nil, fmt.Errorf("idemotel: idem.body.duration: %w", err)
	}
	if t.sweepRows, err = meter.Int64Counter("idem.sweep.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Expired ledger rows deleted by sweeps.")); err != nil {
		return nil, fmt.Errorf("idemotel: idem.sweep.rows: %w", err)
	}
	if _, err = meter.Float64ObservableGauge("idem.replay.ratio", metric.WithUnit("1"),
		metric.WithDescription("Replays divided by replays and claims, per method, since the process started."),
		metric.WithFloat64Callback(t.observeRatios)); err != nil {
		return nil, fmt.Errorf("idemotel: idem.replay.ratio: %w", err)
	}
	return t, nil
}

// Hooks returns the hooks to pass to idem.WithHooks.
func (t *Telemetry) Hooks() idem.Hooks {
	return idem.Hooks{
		Claimed: func(ctx context.Context, e idem.Event) {
			t.count(e.Method, func(r *ratio) { r.claims++ })
			t.event(ctx, "idem.claim", OutcomeClaimed, e, AttrFence.Int64(e.Fence))
		},
		Executed: t.executed,
		Replayed: func(ctx context.Context, e idem.Event) {
			t.count(e.Method, func(r *ratio) { r.replays++ })
			t.event(ctx, "idem.replay", OutcomeReplayed, e)
		},
		Mismatch:   func(ctx context.Context, e idem.Event) { t.event(ctx, "idem.mismatch", OutcomeMismatch, e) },
		InProgress: func(ctx context.Context, e idem.Event) { t.event(ctx, "idem.in_progress", OutcomeInProgress, e) },
		TakenOver: func(ctx context.Context, e idem.Event) {
			t.event(ctx, "idem.takeover", OutcomeTakenOver, e, AttrFence.Int64(e.Fence))
		},
		LockLost: func(ctx context.Context, e idem.Event) {
			t.event(ctx, "idem.lock_lost", OutcomeLockLost, e, AttrFence.Int64(e.Fence))
		},
		Swept: t.swept,
	}
}

// spanAttrs are the attributes every span of e carries.
func (t *Telemetry) spanAttrs(e idem.Event, extra ...attribute.KeyValue) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrMethod.String(e.Method)}
	if t.keys {
		attrs = append(attrs, AttrScope.String(e.Scope), AttrKey.String(e.Key))
	}
	return append(attrs, extra...)
}

// event records a point-in-time hook: a span without duration and a count.
func (t *Telemetry) event(ctx context.Context, name, outcome string, e idem.Event, extra ...attribute.KeyValue) {
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(t.spanAttrs(e, extra...)...))
	if outcome == OutcomeMismatch || outcome == OutcomeLockLost {
		span.SetStatus(codes.Error, name)
	}
	span.End()
	t.outcomes.Add(ctx, 1, metric.WithAttributes(AttrMethod.String(e.Method), AttrOutcome.String(outcome)))
}

// executed records the body: a span over its measured duration, its
// duration and a count.
func (t *Telemetry) executed(ctx context.Context, e idem.Event) {
	end := time.Now()
	attrs := t.spanAttrs(e, AttrFence.Int64(e.Fence))
	metricAttrs := []attribute.KeyValue{AttrMethod.String(e.Method)}
	if e.Err != nil {
		typ := errorType(e.Err)
		attrs = append(attrs, AttrErrorType.String(typ))
		metricAttrs = append(metricAttrs, AttrErrorType.String(typ))
	}
	_, span := t.tracer.Start(ctx, "idem.body", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(end.Add(-e.Duration)), trace.WithAttributes(attrs...))
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
	t.duration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(metricAttrs...))
	t.outcomes.Add(ctx, 1, metric.WithAttributes(append(metricAttrs, AttrOutcome.String(OutcomeExecuted))...))
}

// swept records a sweep batch.
func (t *Telemetry) swept(ctx context.Context, e idem.Event) {
	var metricAttrs []attribute.KeyValue
	if e.Method != "" {
		metricAttrs = append(metricAttrs, AttrMethod.String(e.Method))
	}
	end := time.Now()
	_, span := t.tracer.Start(ctx, "idem.sweep", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithAttributes(append(metricAttrs, AttrSweepRows.Int64(e.Rows))...))
	span.End(trace.WithTimestamp(end))
	t.sweepRows.Add(ctx, e.Rows, metric.WithAttributes(metricAttrs...))
}

// errorType is error.type for a body's error: the idem sentinel it wraps,
// or else its Go type, a bounded set either way (never its message).
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{idem.ErrLockLost, "lock_lost"},
		{idem.ErrStore, "store"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return fmt.Sprintf("%T", err)
}

// count updates the replay ratio's counts of method.
func (t *Telemetry) count(method string, f func(*ratio)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.ratios[method]
	if r == nil {
		r = &ratio{}
		t.ratios[method] = r
	}
	f(r)
}

// observeRatios reports the replay ratio of every method seen so far.
func (t *Telemetry) observeRatios(_ context.Context, o metric.Float64Observer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for method, r := range t.ratios {
		if n := r.replays + r.claims; n > 0 {
			o.Observe(float64(r.replays)/float64(n), metric.WithAttributes(AttrMethod.String(method)))
		}
	}
	return nil
}
