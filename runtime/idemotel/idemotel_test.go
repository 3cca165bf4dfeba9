package idemotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemotel"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// Receipt is the response of the test methods.
type Receipt struct {
	ID  int64
	Ref string
}

const lockTimeout = 30 * time.Second

var errDeclined = errors.New("card declined")

func method(name string) *idem.Method[Receipt] {
	return &idem.Method[Receipt]{Name: name, Retention: time.Hour, LockTimeout: lockTimeout,
		FinalErrors: []idem.FinalError{{Name: "errDeclined", Err: errDeclined}}}
}

func fp(name, req string) []byte {
	f := idem.NewFingerprinter(name)
	f.Field("req")
	f.String(req)
	return f.Sum()
}

// env is a store on a fresh database whose hooks record into an SDK tracer
// provider (in memory) and meter provider (a manual reader).
type env struct {
	db      *idemtest.DB
	store   *idem.Store
	clock   *idemtest.Clock
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
	reader  *sdkmetric.ManualReader
	charge  *idem.Method[Receipt]
	payout  *idem.Method[Receipt]
	payment func(context.Context, pgx.Tx) (Receipt, error)
}

func newEnv(t *testing.T, opts ...idemotel.Option) *env {
	t.Helper()
	e := &env{clock: idemtest.NewClock(time.Time{}), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(),
		charge: method("Payments.Charge"), payout: method("Payments.Payout")}
	e.db = idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY)`))
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		assert.NoError(t, e.tp.Shutdown(context.Background()))
		assert.NoError(t, mp.Shutdown(context.Background()))
	})
	tel, err := idemotel.New(e.tp, mp, opts...)
	require.NoError(t, err)
	e.store, err = idem.NewStore(e.db.Pool, idem.WithHooks(tel.Hooks()), idem.WithClock(e.clock.Now))
	require.NoError(t, err)
	e.payment = func(ctx context.Context, tx pgx.Tx) (Receipt, error) {
		var r Receipt
		return r, tx.QueryRow(ctx, `INSERT INTO payments DEFAULT VALUES RETURNING id`).Scan(&r.ID)
	}
	return e
}

func keyed(ctx context.Context, key string) context.Context {
	return idem.ContextWithScope(idem.ContextWithKey(ctx, key), "acct_42")
}

// spansNamed returns the ended spans called name.
func (e *env) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// collect reads the metrics once.
func (e *env) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, idemotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// outcomes sums idem.outcomes by method and outcome.
func outcomes(t *testing.T, m metricdata.Metrics) map[[2]string]int64 {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "idem.outcomes is an int64 sum")
	assert.True(t, sum.IsMonotonic)
	out := map[[2]string]int64{}
	for _, dp := range sum.DataPoints {
		method, _ := dp.Attributes.Value(idemotel.AttrMethod)
		outcome, _ := dp.Attributes.Value(idemotel.AttrOutcome)
		out[[2]string{method.AsString(), outcome.AsString()}] += dp.Value
	}
	return out
}

// TestSpansAndMetrics drives every hook with real calls against PostgreSQL
// and checks the spans and metrics they turn into.
func TestSpansAndMetrics(t *testing.T) {
	e := newEnv(t)
	ctx, parent := e.tp.Tracer("test").Start(context.Background(), "POST /v1/charges")

	// Atomic: a claim and a body, then a replay, then a mismatch (the
	// retries marked, so they look the key up instead of running the body).
	first, err := idem.Atomic(keyed(ctx, "k-1"), e.store, e.charge, fp("charge", "1"), e.payment)
	require.NoError(t, err)
	again, err := idem.Atomic(idem.ContextWithRetry(keyed(ctx, "k-1")), e.store, e.charge, fp("charge", "1"), e.payment)
	require.NoError(t, err)
	require.Equal(t, first, again)
	_, err = idem.Atomic(idem.ContextWithRetry(keyed(ctx, "k-1")), e.store, e.charge, fp("charge", "2"), e.payment)
	require.ErrorIs(t, err, idem.ErrMismatch)
	// A failing body (not final): the body span says so.
	failed := errors.New("boom")
	_, err = idem.Atomic(keyed(ctx, "k-2"), e.store, e.charge, fp("charge", "1"), func(context.Context, pgx.Tx) (Receipt, error) {
		return Receipt{}, failed
	})
	require.ErrorIs(t, err, failed)

	// External: a twin while the first runs is in progress; after the lock
	// expires a third attempt takes over, and the first, finishing late,
	// has lost its lock.
	started, release := make(chan struct{}), make(chan struct{})
	zombie := make(chan error, 1)
	go func() {
		_, err := idem.External(keyed(ctx, "p-1"), e.store, e.payout, fp("payout", "1"), func(context.Context) (Receipt, error) {
			close(started)
			<-release
			return Receipt{Ref: "zombie"}, nil
		})
		zombie <- err
	}()
	<-started
	_, err = idem.External(keyed(ctx, "p-1"), e.store, e.payout, fp("payout", "1"), func(context.Context) (Receipt, error) {
		t.Error("a twin must not run")
		return Receipt{}, nil
	})
	require.ErrorIs(t, err, idem.ErrInProgress)
	e.clock.Advance(lockTimeout + time.Second)
	_, err = idem.External(keyed(ctx, "p-1"), e.store, e.payout, fp("payout", "1"), func(context.Context) (Receipt, error) {
		return Receipt{Ref: "winner"}, nil
	})
	require.NoError(t, err)
	close(release)
	require.ErrorIs(t, <-zombie, idem.ErrLockLost)

	// A sweep after the retention window.
	e.clock.Advance(2 * time.Hour)
	n, err := e.store.Sweep(context.Background(), 0)
	require.NoError(t, err)
	require.Positive(t, n)
	parent.End()

	// Spans.
	counts := map[string]int{}
	for _, s := range e.spans.Ended() {
		counts[s.Name()]++
	}
	assert.Equal(t, map[string]int{
		"POST /v1/charges": 1,
		"idem.claim":       4, // k-1, k-2, p-1, p-1 taken over
		"idem.body":        4, // k-1, k-2 (failed), p-1 zombie, p-1 winner
		"idem.replay":      1,
		"idem.mismatch":    1,
		"idem.in_progress": 1,
		"idem.takeover":    1,
		"idem.lock_lost":   1,
		"idem.sweep":       1,
	}, counts)
	for _, s := range e.spans.Ended() {
		if s.Name() == "idem.sweep" || s.Name() == "POST /v1/charges" {
			continue
		}
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the request's span", s.Name())
		m, _ := attr(s, idemotel.AttrMethod)
		assert.Contains(t, []string{"Payments.Charge", "Payments.Payout"}, m.AsString(), s.Name())
		k, _ := attr(s, idemotel.AttrKey)
		assert.Contains(t, []string{"k-1", "k-2", "p-1"}, k.AsString(), s.Name())
		sc, _ := attr(s, idemotel.AttrScope)
		assert.Equal(t, "acct_42", sc.AsString(), s.Name())
	}
	for _, s := range e.spansNamed("idem.body") {
		k, _ := attr(s, idemotel.AttrKey)
		if k.AsString() == "k-2" {
			assert.Equal(t, codes.Error, s.Status().Code, "the failed body")
			typ, ok := attr(s, idemotel.AttrErrorType)
			assert.True(t, ok)
			assert.Equal(t, "*errors.errorString", typ.AsString())
		} else {
			assert.Equal(t, codes.Unset, s.Status().Code)
		}
		assert.False(t, s.EndTime().Before(s.StartTime()), "the body span covers the body's duration")
	}
	for _, name := range []string{"idem.mismatch", "idem.lock_lost"} {
		assert.Equal(t, codes.Error, e.spansNamed(name)[0].Status().Code, name)
	}
	fence, ok := attr(e.spansNamed("idem.takeover")[0], idemotel.AttrFence)
	require.True(t, ok)
	assert.Equal(t, int64(2), fence.AsInt64(), "the takeover's fence follows the first claim's")
	rows, _ := attr(e.spansNamed("idem.sweep")[0], idemotel.AttrSweepRows)
	assert.Equal(t, n, rows.AsInt64())

	// Metrics.
	ms := e.collect(t)
	assert.Equal(t, map[[2]string]int64{
		{"Payments.Charge", "claimed"}:     2,
		{"Payments.Charge", "executed"}:    2,
		{"Payments.Charge", "replayed"}:    1,
		{"Payments.Charge", "mismatch"}:    1,
		{"Payments.Payout", "claimed"}:     2,
		{"Payments.Payout", "executed"}:    2,
		{"Payments.Payout", "in_progress"}: 1,
		{"Payments.Payout", "taken_over"}:  1,
		{"Payments.Payout", "lock_lost"}:   1,
	}, outcomes(t, ms["idem.outcomes"]))

	hist, ok := ms["idem.body.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok, "idem.body.duration is a float64 histogram")
	assert.Equal(t, "s", ms["idem.body.duration"].Unit)
	var bodies uint64
	for _, dp := range hist.DataPoints {
		bodies += dp.Count
	}
	assert.Equal(t, uint64(4), bodies)

	gauge, ok := ms["idem.replay.ratio"].Data.(metricdata.Gauge[float64])
	require.True(t, ok, "idem.replay.ratio is a float64 gauge")
	ratios := map[string]float64{}
	for _, dp := range gauge.DataPoints {
		m, _ := dp.Attributes.Value(idemotel.AttrMethod)
		ratios[m.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]float64{"Payments.Charge": 1.0 / 3, "Payments.Payout": 0}, ratios)

	swept, ok := ms["idem.sweep.rows"].Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, swept.DataPoints, 1)
	assert.Equal(t, n, swept.DataPoints[0].Value)

	// No metric carries a key or a scope.
	for name, m := range ms {
		for _, set := range attributeSets(m) {
			for _, k := range []attribute.Key{idemotel.AttrKey, idemotel.AttrScope} {
				_, has := set.Value(k)
				assert.False(t, has, "%s has %s", name, k)
			}
		}
	}
}

// TestWithoutKeys leaves the key and the scope out of spans.
func TestWithoutKeys(t *testing.T) {
	e := newEnv(t, idemotel.WithoutKeys())
	_, err := idem.Atomic(keyed(context.Background(), "secret-key"), e.store, e.charge, fp("charge", "1"), e.payment)
	require.NoError(t, err)
	require.NotEmpty(t, e.spans.Ended())
	for _, s := range e.spans.Ended() {
		_, hasKey := attr(s, idemotel.AttrKey)
		_, hasScope := attr(s, idemotel.AttrScope)
		assert.False(t, hasKey || hasScope, s.Name())
		_, hasMethod := attr(s, idemotel.AttrMethod)
		assert.True(t, hasMethod, s.Name())
	}
}

func TestNewRefusesNilProviders(t *testing.T) {
	_, err := idemotel.New(nil, sdkmetric.NewMeterProvider())
	assert.Error(t, err)
	_, err = idemotel.New(sdktrace.NewTracerProvider(), nil)
	assert.Error(t, err)
}

func attributeSets(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// TestREADMEOpenTelemetry runs the README's snippet with the global
// providers set to the SDK's, and sees a call's spans and metrics.
func TestREADMEOpenTelemetry(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY)`))
	spans, reader := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	pool := db.Pool
	open := func() (*idem.Store, error) {
		tel, err := idemotel.New(otel.GetTracerProvider(), otel.GetMeterProvider())
		if err != nil {
			return nil, err
		}
		store, err := idem.NewStore(pool, idem.WithHooks(tel.Hooks()))
		return store, err
	}
	store, err := open()
	require.NoError(t, err)
	_, err = idem.Atomic(keyed(context.Background(), "k"), store, method("Payments.Charge"), fp("charge", "1"),
		func(context.Context, pgx.Tx) (Receipt, error) { return Receipt{ID: 1}, nil })
	require.NoError(t, err)
	assert.Len(t, spans.Ended(), 2, "claim and body")
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	assert.NotEmpty(t, rm.ScopeMetrics[0].Metrics)
}
