package nowrapper

import "context"

// Orders is annotated but not generated yet: still reported, naming the wrapper to come.
type Orders struct{}

// Place places an order.
//
//go:generate idemgen -mode=external
func (o *Orders) Place(ctx context.Context) error { return nil } // want Place:"idemgen wrapper IdempotentOrders"

func use(ctx context.Context) {
	(&Orders{}).Place(ctx) // want `Orders.Place bypasses its idempotent wrapper: .* call IdempotentOrders.Place instead`
}
