package example

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// FakeBank is an in-memory bank for the demo and the tests. Like real payment
// providers it deduplicates transfers by their Idempotency-Key, and it counts
// what it was asked to do.
type FakeBank struct {
	// Delay, if set, is how long each transfer takes.
	Delay time.Duration

	mu        sync.Mutex
	calls     int
	transfers map[string]string // Idempotency-Key → reference
}

// NewFakeBank returns an empty bank.
func NewFakeBank() *FakeBank { return &FakeBank{transfers: map[string]string{}} }

// ServeHTTP handles POST /transfers.
func (b *FakeBank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/transfers" {
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	if b.Delay > 0 {
		select {
		case <-time.After(b.Delay):
		case <-r.Context().Done():
			return
		}
	}
	b.mu.Lock()
	b.calls++
	ref, ok := b.transfers[key]
	if !ok {
		ref = fmt.Sprintf("bank_tr_%04d", len(b.transfers)+1)
		b.transfers[key] = ref
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ref": ref})
}

// Calls returns how many transfer requests reached the bank.
func (b *FakeBank) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// Transfers returns how many distinct transfers the bank executed.
func (b *FakeBank) Transfers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.transfers)
}
