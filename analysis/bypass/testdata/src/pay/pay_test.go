package pay

import "context"

// The declaring package's tests call the bare method: not reported.
func testBare(ctx context.Context) {
	p := &Payments{}
	p.Payout(ctx, 1)
	f := p.Charge
	_ = f
}
