package idemgrpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkTwinOfAHolder times the in-progress answer a twin gets while the
// first call of its key holds the seat's row inside its body (what
// TestTwinOfAHolderGetsAbortedWithRetryInfo checks is ABORTED with
// RetryInfo), on each store, against Seat's claim wait of 300 ms
// (idemtest.BenchTwinsOfAHolder). Run it with:
//
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemgrpc
func BenchmarkTwinOfAHolder(b *testing.B) {
	for _, p := range []struct {
		name  string
		onSQL bool
	}{{"pgx", false}, {"database_sql", true}} {
		b.Run(p.name, func(b *testing.B) {
			s, cc := startOn(b, p.onSQL)
			seat := func(ctx context.Context, key string) error {
				_, _, err := call(ctx, cc, "Seat", "acct_1", key, newReq("", 300))
				return err
			}
			idemtest.BenchTwinsOfAHolder(b, s.seatHold, 300*time.Millisecond, seat, func(ctx context.Context, key string) error {
				if err := seat(ctx, key); status.Code(err) != codes.Aborted {
					return fmt.Errorf("got %v, want ABORTED", err)
				}
				return nil
			})
		})
	}
}
