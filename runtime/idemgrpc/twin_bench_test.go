package idemgrpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkTwinOfAHolder times the in-progress answer a twin gets while the
// first call of its key holds the seat's row inside its body (what
// TestTwinOfAHolderGetsAbortedWithRetryInfo checks is ABORTED with
// RetryInfo): each iteration holds a first call on a new key, sends the
// twin and times it from its send to its answer, on each store. Seat's
// store has a claim wait of 300 ms, the bound the twin's wait is reported
// against (idemtest.ReportWaits). Run it with:
//
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemgrpc
func BenchmarkTwinOfAHolder(b *testing.B) {
	for _, p := range []struct {
		name  string
		onSQL bool
	}{{"pgx", false}, {"database_sql", true}} {
		b.Run(p.name, func(b *testing.B) {
			s, cc := startOn(b, p.onSQL)
			var waits []time.Duration
			for i := range b.N {
				s.seatHold.Rearm()
				key := fmt.Sprintf("seat-%d", i)
				done := make(chan error, 1)
				go func() {
					_, _, err := call(b.Context(), cc, "Seat", "acct_1", key, newReq("", 300))
					done <- err
				}()
				<-s.seatHold.Reached()
				ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
				start := time.Now()
				_, _, err := call(ctx, cc, "Seat", "acct_1", key, newReq("", 300))
				waits = append(waits, time.Since(start))
				cancel()
				require.Equal(b, codes.Aborted, status.Code(err), "twin: %v", err)
				s.seatHold.Release()
				require.NoError(b, <-done)
			}
			idemtest.ReportWaits(b, waits, 300*time.Millisecond)
		})
	}
}
