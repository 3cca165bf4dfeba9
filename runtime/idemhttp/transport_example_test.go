package idemhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// ExampleTransport sends one charge through a server whose first answer is a
// 503: the transport retries with the same key, and the caller sees the 201.
func ExampleTransport() {
	var attempts atomic.Int64
	keys := make(chan string, 2)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("Idempotency-Key")
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer api.Close()

	req, err := http.NewRequest(http.MethodPost, api.URL+"/v1/charges", strings.NewReader(`{"amount_cents":1250}`))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &idemhttp.Transport{}}
	resp, err := client.Do(req) // a POST: one new key, kept for every attempt
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts.Load(), "attempts; same key:", <-keys == <-keys)
	// Output: 201 after 2 attempts; same key: true
}
