package retry

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Once makes the key before the loop: every retry sends it again.
func Once(ctx context.Context) error {
	ctx = idem.ContextWithKey(ctx, uuid.NewString())
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = charge(ctx); err == nil {
			return nil
		}
	}
	return err
}

// OnceHeader makes the header's key before the loop.
func OnceHeader(req *http.Request) {
	key := uuid.NewString()
	for {
		req.Header.Set("Idempotency-Key", key)
		if _, err := http.DefaultClient.Do(req); err == nil {
			return
		}
	}
}

type Order struct{ ID string }

// PerOrder derives each key from the order it stands for.
func PerOrder(ctx context.Context, orders []Order) {
	for _, o := range orders {
		start := time.Now()
		_ = charge(idem.ContextWithKey(ctx, "order-"+o.ID))
		_ = time.Since(start)
	}
}

// Prepare makes keyed contexts in a loop that does not make the call.
func Prepare(ctx context.Context, n int) []context.Context {
	var out []context.Context
	for range n {
		out = append(out, idem.ContextWithKey(ctx, uuid.NewString()))
	}
	return out
}

// Draw loops to draw a key, and calls once after the loop.
func Draw(ctx context.Context, taken map[string]bool) error {
	var key string
	for {
		key = uuid.NewString()
		if !taken[key] {
			break
		}
	}
	return charge(idem.ContextWithKey(ctx, key))
}

// Routes registers a handler per route: each request is its own intention,
// not an iteration of the loop.
func Routes(mux *http.ServeMux, routes []string) {
	for _, r := range routes {
		mux.HandleFunc(r, func(w http.ResponseWriter, req *http.Request) {
			_ = charge(idem.ContextWithKey(req.Context(), uuid.NewString()))
		})
	}
}

// TraceHeader is another header: a fresh trace id per attempt is right.
func TraceHeader(req *http.Request) {
	for {
		req.Header.Set("X-Request-Id", uuid.NewString())
		if _, err := http.DefaultClient.Do(req); err == nil {
			return
		}
	}
}

// Last keys a context on each iteration but makes the call after the loop,
// once.
func Last(ctx context.Context, n int) error {
	kctx := ctx
	for range n {
		kctx = idem.ContextWithKey(ctx, uuid.NewString())
	}
	return charge(kctx)
}

// Generic makes its key through a function value it cannot see into.
func Generic[K ~string](ctx context.Context, mk func() K) {
	for range 2 {
		_ = charge(idem.ContextWithKey(ctx, string(mk())))
	}
}

// Lazy makes the key on the first iteration only and keeps it.
func Lazy(ctx context.Context) {
	key := ""
	for {
		if key == "" {
			key = uuid.NewString()
		}
		if charge(idem.ContextWithKey(ctx, key)) == nil {
			return
		}
	}
}
