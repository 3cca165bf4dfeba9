package pay_test

import (
	"context"

	"pay"
)

func testExternal(ctx context.Context) {
	(&pay.Payments{}).Payout(ctx, 1)
}
