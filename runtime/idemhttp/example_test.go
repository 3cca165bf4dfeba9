package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// charge stands in for an idemgen-generated wrapper, which reads the key and
// the scope from ctx. This one reports a twin in flight for the key "busy".
func charge(ctx context.Context, amount int64) (string, error) {
	key, _ := idem.KeyFrom(ctx)
	if key == "busy" {
		return "", &idem.InProgressError{Method: "Payments.Charge", Key: key, RetryAfter: 1500 * time.Millisecond}
	}
	return fmt.Sprintf("charged %d to %s with key %s", amount, idem.ScopeFrom(ctx), key), nil
}

// Example wires the middleware into an http.ServeMux: only the POST route
// requires a key; the GET route is left alone.
func Example() {
	mw := idemhttp.New(idemhttp.Config{
		// The scope is the authenticated account, so keys never cross tenants.
		// (Real code reads it from what the authentication middleware stored.)
		Scope: func(r *http.Request) (string, error) {
			account, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return "", errors.New("no bearer token")
			}
			return account, nil
		},
	})

	mux := http.NewServeMux()
	mux.Handle("POST /charges", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		receipt, err := charge(r.Context(), 100)
		if idemhttp.WriteError(w, r, err) {
			return // 409, 422, 400 or 503 as problem+json
		}
		if err != nil {
			http.Error(w, "charge failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, receipt)
	})))
	mux.HandleFunc("GET /charges/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "charge", r.PathValue("id"))
	})

	send := func(method, key string) {
		r := httptest.NewRequest(method, "/charges", nil)
		if method == http.MethodGet {
			r = httptest.NewRequest(method, "/charges/ch_1", nil)
		}
		r.Header.Set("Authorization", "Bearer acct_42")
		if key != "" {
			r.Header.Set(idemhttp.HeaderKey, key)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Print(w.Code, " ")
		if w.Header().Get("Content-Type") == idemhttp.ContentTypeProblem {
			var p idemhttp.Problem
			_ = json.NewDecoder(w.Body).Decode(&p)
			fmt.Printf("%s (Retry-After %q)\n", p.Title, w.Header().Get("Retry-After"))
			return
		}
		fmt.Print(w.Body.String())
	}
	send(http.MethodPost, `"8e03978e-40d5"`) // the draft's sf-string form
	send(http.MethodPost, "8e03978e-40d5")   // the bare form
	send(http.MethodPost, "")
	send(http.MethodPost, `"unterminated`)
	send(http.MethodPost, "busy")
	send(http.MethodGet, "")
	// Output:
	// 201 charged 100 to acct_42 with key 8e03978e-40d5
	// 201 charged 100 to acct_42 with key 8e03978e-40d5
	// 400 Idempotency-Key is missing (Retry-After "")
	// 400 Idempotency-Key is invalid (Retry-After "")
	// 409 A request is outstanding for this Idempotency-Key (Retry-After "2")
	// 200 charge ch_1
}

// ExampleWriteError shows the problem details written for a key reused with
// a different request.
func ExampleWriteError() {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/charges", nil)
	err := fmt.Errorf("charge: %w", &idem.MismatchError{Method: "Payments.Charge", Key: "k1"})
	if idemhttp.WriteError(w, r, err) {
		fmt.Println(w.Code, w.Header().Get("Content-Type"))
		var p map[string]any
		_ = json.NewDecoder(w.Body).Decode(&p)
		out, _ := json.MarshalIndent(p, "", "  ")
		fmt.Println(string(out))
	}
	// Output:
	// 422 application/problem+json
	// {
	//   "detail": "This Idempotency-Key was already used with a different request. Send a new key for a new request; resend the original request unchanged to get its response.",
	//   "instance": "/charges",
	//   "status": 422,
	//   "title": "Idempotency-Key is already used",
	//   "type": "https://github.com/idemgen/idemgen/blob/main/runtime/idemhttp/README.md#mismatch"
	// }
}
