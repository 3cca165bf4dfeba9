package grpcapi

import (
	"errors"
	"strings"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi/paymentsv1"
)

// account reads the caller's account from the values of the authorization
// metadata (the Authorization header over Connect): "Bearer <account>". A
// real service would verify a token here; the example trusts it, as its
// HTTP API does.
func account(vals []string) (string, error) {
	if len(vals) != 1 {
		return "", errors.New("send one authorization value: Bearer <account>")
	}
	acct, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || acct == "" || len(acct) > 64 {
		return "", errors.New("missing or malformed bearer token")
	}
	return acct, nil
}

func chargeRequest(acct string, r *paymentsv1.ChargeRequest) example.ChargeRequest {
	return example.ChargeRequest{
		Account: acct, AmountCents: r.GetAmountCents(), Currency: r.GetCurrency(),
		Card: example.Card{Number: r.GetCard().GetNumber(), ExpMonth: int(r.GetCard().GetExpMonth()),
			ExpYear: int(r.GetCard().GetExpYear())},
		Description: r.GetDescription(), Metadata: r.GetMetadata(),
	}
}

func receipt(r example.Receipt) *paymentsv1.Receipt {
	return &paymentsv1.Receipt{
		PaymentId: r.PaymentID, Account: r.Account, AmountCents: r.AmountCents, Currency: r.Currency,
		CardLast4: r.CardLast4, BalanceCents: r.BalanceCents, LedgerEntryIds: r.LedgerEntryIDs,
	}
}

func refundRequest(acct string, r *paymentsv1.RefundRequest) example.RefundRequest {
	return example.RefundRequest{Account: acct, PaymentID: r.GetPaymentId(), AmountCents: r.GetAmountCents(), Reason: r.GetReason()}
}

func refundReceipt(r example.RefundReceipt) *paymentsv1.RefundReceipt {
	return &paymentsv1.RefundReceipt{RefundId: r.RefundID, PaymentId: r.PaymentID, AmountCents: r.AmountCents,
		RefundedCents: r.RefundedCents, BalanceCents: r.BalanceCents}
}

func payoutRequest(acct string, r *paymentsv1.PayoutRequest) example.PayoutRequest {
	return example.PayoutRequest{Account: acct, AmountCents: r.GetAmountCents()}
}

func payoutReceipt(r example.PayoutReceipt) *paymentsv1.PayoutReceipt {
	return &paymentsv1.PayoutReceipt{PayoutId: r.PayoutID, Account: r.Account, AmountCents: r.AmountCents,
		BankRef: r.BankRef, BalanceCents: r.BalanceCents}
}
