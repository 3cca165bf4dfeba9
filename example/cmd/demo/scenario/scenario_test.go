package scenario

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestRunFailsWithoutIdempotency serves charges without the generated
// wrapper: the retry after the lost response charges the card a second
// time, and the demo must say so and fail, not print a success.
func TestRunFailsWithoutIdempotency(t *testing.T) {
	db := idemtest.New(t, idemtest.WithoutLedger())
	var out bytes.Buffer
	res, err := Run(t.Context(), &out, db.URL, Options{api: plainChargeAPI})
	t.Log("demo output:\n" + out.String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 payments in the database")
	assert.Contains(t, out.String(), "✗ 2 payments in the database")
	assert.NotContains(t, out.String(), "checks passed")
	require.NotNil(t, res)
	assert.Equal(t, 2, res.Payments)
}

// plainChargeAPI serves POST /v1/charges by calling Payments.Charge in a
// transaction of its own, with no idempotency key in sight.
func plainChargeAPI(_ *example.IdempotentPayments, inner *example.Payments, pool *pgxpool.Pool, _ *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req example.ChargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Account = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		var receipt example.Receipt
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			var err error
			//idem:bypass-ok the scenario must catch a handler without the wrapper
			receipt, err = inner.Charge(r.Context(), tx, req)
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(receipt)
	})
}
