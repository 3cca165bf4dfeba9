package idemledger_test

import (
	"context"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemledger"
)

// fingerprintShopCharge stands for the function idemgen generates into the
// service's package (fingerprintPaymentsCharge and the like).
func fingerprintShopCharge(req ChargeRequest) []byte {
	f := idem.NewFingerprinter("Payments.Charge")
	f.Field("req")
	f.Int(req.Amount)
	return f.Sum()
}

// LedgerFingerprints is what a service's package exports for its own build
// of the command: one fingerprint function per method, so that
// `inspect -request FILE` can say replay or mismatch.
func LedgerFingerprints() []idemledger.Option {
	return []idemledger.Option{
		idemledger.WithFingerprint("example.com/shop.Payments.Charge", idemledger.JSONRequest(fingerprintShopCharge)),
	}
}

// A service builds the command into a binary of its own (cmd/shopledger,
// say) with its methods' fingerprint functions; its main is one line.
func ExampleMain() {
	args := []string{"inspect", "-scope", "acct_42", "-request", "charge.json", "order-1042"}
	code := idemledger.Main(context.Background(), args, LedgerFingerprints()...)
	_ = code // os.Exit(code) in a real main
}
