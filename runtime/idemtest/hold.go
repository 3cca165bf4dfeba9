package idemtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// A Hold keeps the first body that reaches it waiting until the test
// releases it: a test holds a call where it has taken its rows (a seat, an
// account), sends a twin meanwhile, and checks what the twin is answered.
// Later bodies pass at once. Rearm makes the next body the first again, so
// one service serves a benchmark's iterations. The zero Hold is not ready:
// make one with NewHold. A Hold is safe for concurrent use.
type Hold struct {
	mu       sync.Mutex
	passed   int64
	reached  chan struct{}
	released chan struct{}
}

// NewHold returns an armed Hold.
func NewHold() *Hold {
	return &Hold{reached: make(chan struct{}), released: make(chan struct{})}
}

// Pass is called by a body where it holds its rows. The first body since
// the Hold was made or rearmed waits there until Release or until ctx
// ends (its error is returned); every body is counted (Passed).
func (h *Hold) Pass(ctx context.Context) error {
	h.mu.Lock()
	h.passed++
	first := h.passed == 1
	reached, released := h.reached, h.released
	h.mu.Unlock()
	if !first {
		return nil
	}
	close(reached)
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Reached is closed when the first body is held.
func (h *Hold) Reached() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reached
}

// Release lets the held body go on; it may be called more than once.
func (h *Hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.released:
	default:
		close(h.released)
	}
}

// Passed is how many bodies reached the Hold since it was made or rearmed.
func (h *Hold) Passed() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.passed
}

// Rearm releases a body still held and makes the next body to pass the
// first again.
func (h *Hold) Rearm() {
	h.Release()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.passed = 0
	h.reached, h.released = make(chan struct{}), make(chan struct{})
}

// ReportWaits reports how long a benchmark's calls waited for their
// answers, each bounded by bound (a store's claim wait): the median and the
// longest, in milliseconds, and how far the longest went past the bound
// (max-over-bound-ms, negative when every wait ended before it). The
// benchmark's ns/op, which counts each iteration's set-up, is hidden. It
// reports figures only: a benchmark, not a test, is where a machine's
// load may show.
func ReportWaits(b *testing.B, waits []time.Duration, bound time.Duration) {
	b.Helper()
	if len(waits) == 0 {
		return
	}
	w := slices.Clone(waits)
	slices.Sort(w)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(w[len(w)/2]), "p50-ms")
	b.ReportMetric(ms(w[len(w)-1]), "max-ms")
	b.ReportMetric(ms(w[len(w)-1]-bound), "max-over-bound-ms")
}

// BenchTwinsOfAHolder times, b.N times, the answer a twin gets while the
// first call of its key is held in its body: each iteration rearms h,
// starts first on a new key, waits until h holds its body, then times twin
// on the same key (for at most a minute), releases the first and waits
// for it. first returns nil when the call succeeded; twin returns nil when
// the twin got the in-progress answer its transport gives. The waits are
// reported against bound, the store's claim wait (ReportWaits).
func BenchTwinsOfAHolder(b *testing.B, h *Hold, bound time.Duration, first, twin func(ctx context.Context, key string) error) {
	b.Helper()
	var waits []time.Duration
	for i := range b.N {
		h.Rearm()
		key := fmt.Sprintf("twin-of-a-holder-%d", i)
		done := make(chan error, 1)
		go func() { done <- first(b.Context(), key) }()
		<-h.Reached()
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		start := time.Now()
		err := twin(ctx, key)
		waits = append(waits, time.Since(start))
		cancel()
		h.Release()
		if err != nil {
			b.Fatalf("the twin of a held call: %v", err)
		}
		if err := <-done; err != nil {
			b.Fatalf("the held call: %v", err)
		}
	}
	ReportWaits(b, waits, bound)
}
