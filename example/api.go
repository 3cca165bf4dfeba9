package example

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// maxBody bounds request bodies: inputs from HTTP are bounded.
const maxBody = 64 << 10

// NewAPI serves svc over HTTP:
//
//	POST /v1/charges   ChargeRequest → 201 Receipt        (Idempotency-Key required)
//	POST /v1/refunds   RefundRequest → 201 RefundReceipt  (Idempotency-Key required)
//	POST /v1/payouts   PayoutRequest → 201 PayoutReceipt  (Idempotency-Key required)
//	POST /v1/deposits  DepositRequest → 201 DepositReceipt (Idempotency-Key required; inline mode)
//
// Callers authenticate with "Authorization: Bearer <account>"; the account is
// the idempotency scope, so one merchant's key never replays another's
// response, and it is the account every query checks ownership against (it
// overrides the account in a charge's or payout's body; a refund of another
// account's payment is 404, like a payment that does not exist). (A real service would
// verify a token here; the example trusts the header.)
func NewAPI(svc *IdempotentPayments, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", handle(log, func(ctx context.Context, acct string, req ChargeRequest) (Receipt, error) {
		req.Account = acct
		return svc.Charge(ctx, req)
	}))
	mux.HandleFunc("POST /v1/refunds", handle(log, func(ctx context.Context, acct string, req RefundRequest) (RefundReceipt, error) {
		req.Account = acct
		return svc.Refund(ctx, req)
	}))
	mux.HandleFunc("POST /v1/payouts", handle(log, func(ctx context.Context, acct string, req PayoutRequest) (PayoutReceipt, error) {
		req.Account = acct
		return svc.Payout(ctx, req)
	}))
	mux.HandleFunc("POST /v1/deposits", handle(log, func(ctx context.Context, acct string, req DepositRequest) (DepositReceipt, error) {
		req.Account = acct
		return svc.Deposit(ctx, req)
	}))
	keys := idemhttp.New(idemhttp.Config{Scope: account})
	return keys(mux)
}

// account reads the caller's account from the Authorization header.
func account(r *http.Request) (string, error) {
	acct, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || acct == "" || len(acct) > 64 {
		return "", errors.New("missing or malformed bearer token")
	}
	return acct, nil
}

// handle decodes a JSON request, calls fn and writes its result or error.
func handle[Req, Resp any](log *slog.Logger, fn func(ctx context.Context, acct string, req Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			idemhttp.WriteProblem(w, r, idemhttp.Problem{Type: "about:blank", Title: "Malformed request body",
				Status: http.StatusBadRequest, Detail: "the body must be one JSON object of the documented shape: " + err.Error()})
			return
		}
		acct, _ := account(r) // the middleware has already refused requests without one
		resp, err := fn(r.Context(), acct, req)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(resp)
	}
}

// writeError maps idempotency errors (422, 409, 400, 503) and the service's
// own errors to problem+json responses.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if idemhttp.WriteError(w, r, err) {
		return
	}
	p := idemhttp.Problem{Type: "about:blank", Detail: err.Error()}
	switch {
	case errors.Is(err, ErrCardDeclined):
		p.Title, p.Status = "Card declined", http.StatusPaymentRequired
	case errors.Is(err, ErrInsufficientFunds):
		p.Title, p.Status = "Insufficient funds", http.StatusPaymentRequired
	case errors.Is(err, ErrAlreadyRefunded):
		p.Title, p.Status = "Already refunded", http.StatusConflict
	case errors.Is(err, ErrNotFound):
		p.Title, p.Status = "Not found", http.StatusNotFound
	case errors.Is(err, ErrInvalidRequest):
		p.Title, p.Status = "Invalid request", http.StatusBadRequest
	default:
		log.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "err", err)
		p.Title, p.Status, p.Detail = "Internal error", http.StatusInternalServerError, "the request failed; it is safe to retry with the same Idempotency-Key"
	}
	idemhttp.WriteProblem(w, r, p)
}
