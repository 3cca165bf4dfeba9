package scenario

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// client is the demo's API client: JSON over HTTP, with the account as its
// bearer token and an Idempotency-Key on every request.
type client struct {
	http    *http.Client
	account string
}

// newClient returns a client for account. Keep-alives are off, so every
// attempt is a new connection: net/http silently resends a request that
// carries an Idempotency-Key when a reused connection breaks, which would
// hide the lost response this demo is about.
func newClient(account string) *client {
	return &client{
		http:    &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second},
		account: account,
	}
}

// reply is an HTTP response, read in full.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// replayed reports whether the response carries Idempotent-Replayed: true.
func (r *reply) replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// String summarises the response on one line: status and the headers that
// matter here.
func (r *reply) String() string {
	s := fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status))
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/problem+json") {
		s += " (application/problem+json)"
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		s += ", Retry-After: " + ra
	}
	if r.replayed() {
		s += ", Idempotent-Replayed: true"
	}
	return s
}

// body returns the response body on one line.
func (r *reply) body() string { return string(bytes.TrimSpace(r.Body)) }

// post sends body as JSON to base+path with key as its Idempotency-Key.
func (c *client) post(ctx context.Context, base, path, key string, body any) (*reply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.account)
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	return &reply{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// newKey returns a random UUID (version 4), the usual Idempotency-Key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Dots prints a dot to w every interval until the returned function is
// called, to show that a long step is still going. Nothing else may write to
// w meanwhile; stop returns once the last dot is written.
func Dots(w io.Writer, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprint(w, ".")
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
