package idemconnect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkTwinOfAHolder times the in-progress answer a twin gets while the
// first call of its key holds the seat's row inside its body (what
// TestTwinOfAHolderGetsAbortedWithRetryInfo checks is ABORTED with
// RetryInfo), on each store, against Seat's claim wait of 300 ms
// (idemtest.BenchTwinsOfAHolder). Run it with:
//
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemconnect
func BenchmarkTwinOfAHolder(b *testing.B) {
	for _, p := range []struct {
		name  string
		onSQL bool
	}{{"pgx", false}, {"database_sql", true}} {
		b.Run(p.name, func(b *testing.B) {
			s := startOn(b, p.onSQL)
			c := s.client("Seat")
			seat := func(ctx context.Context, key string) error {
				_, err := send(ctx, c, "acct_1", key, 300)
				return err
			}
			idemtest.BenchTwinsOfAHolder(b, s.seatHold, 300*time.Millisecond, seat, func(ctx context.Context, key string) error {
				if err := seat(ctx, key); connect.CodeOf(err) != connect.CodeAborted {
					return fmt.Errorf("got %v, want ABORTED", err)
				}
				return nil
			})
		})
	}
}
