package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleDB returns a fresh database, with the ledger unless the options
// say otherwise, on the server the package's tests share (idemtest.Open:
// an Example has no *testing.T for idemtest.New), and a function that
// drops it. A service passes its own *pgxpool.Pool to idem.NewStore
// instead.
func exampleDB(setup ...string) (*idemtest.DB, func()) {
	db, err := idemtest.Open(context.Background(), "example", idemtest.WithSetup(setup...))
	if err != nil {
		panic(err)
	}
	return db, func() { _ = db.Close() }
}

// loseFirstAnswer is a client's connection that drops the first response
// after the server sent it: the charge committed, the client never heard.
type loseFirstAnswer struct {
	base http.RoundTripper
	lost bool
	keys []string // the Idempotency-Key of every attempt
}

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	l.keys = append(l.keys, r.Header.Get(idemhttp.HeaderKey))
	resp, err := l.base.RoundTrip(r)
	if err == nil && !l.lost {
		l.lost = true
		resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}

// ExampleNew runs the middleware in front of a real idempotent call, and
// the client's Transport over a connection that loses the first answer.
// The Transport made one key for the intention and sent it on both
// attempts; the second attempt is answered from the ledger: the same
// receipt, marked Idempotent-Replayed, and the charge ran once.
func ExampleNew() {
	// A throwaway database with the ledger (exampleDB); a service has its *pgxpool.Pool.
	db, stop := exampleDB(`CREATE TABLE charges (id bigserial PRIMARY KEY, amount bigint NOT NULL)`)
	defer stop()
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		panic(err)
	}

	// The server: POST /charges, idempotent per account (the scope) and key.
	type chargeRequest struct {
		Amount int64 `json:"amount"`
	}
	chargeMethod := &idem.Method[int64]{Name: "Payments.Charge"}
	var runs atomic.Int64 // the handler runs on the server's goroutines
	charge := func(ctx context.Context, req chargeRequest) (int64, error) {
		f := idem.NewFingerprinter(chargeMethod.Name)
		f.Field("amount")
		f.Int(req.Amount)
		return idem.Atomic(ctx, store, chargeMethod, f.Sum(), func(ctx context.Context, tx pgx.Tx) (int64, error) {
			runs.Add(1)
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES ($1) RETURNING id`, req.Amount).Scan(&id)
			return id, err
		})
	}
	mw := idemhttp.New(idemhttp.Config{Scope: func(r *http.Request) (string, error) {
		account, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return "", errors.New("no bearer token")
		}
		return account, nil
	}})
	mux := http.NewServeMux()
	mux.Handle("POST /charges", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req chargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		id, err := charge(r.Context(), req)
		if idemhttp.WriteError(w, r, err) {
			return
		}
		if err != nil {
			http.Error(w, "charge failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge %d of %d\n", id, req.Amount)
	})))
	api := httptest.NewServer(mux)
	defer api.Close()

	// The client: the Transport gives the POST a key and retries it.
	conn := &loseFirstAnswer{base: http.DefaultTransport}
	client := &http.Client{Transport: &idemhttp.Transport{Base: conn, BaseDelay: 10 * time.Millisecond}}
	req, err := http.NewRequest(http.MethodPost, api.URL+"/charges", strings.NewReader(`{"amount":1250}`))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer acct_42")
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)

	fmt.Print(resp.StatusCode, " ", string(body))
	fmt.Println("replayed:", resp.Header.Get(idemhttp.HeaderReplayed))
	fmt.Println("attempts:", len(conn.keys), "one key:", conn.keys[0] != "" && conn.keys[0] == conn.keys[1])
	fmt.Println("body runs:", runs.Load())
	// Output:
	// 201 charge 1 of 1250
	// replayed: true
	// attempts: 2 one key: true
	// body runs: 1
}
