package idemconnect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

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
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemconnect
func BenchmarkTwinOfAHolder(b *testing.B) {
	for _, p := range []struct {
		name  string
		onSQL bool
	}{{"pgx", false}, {"database_sql", true}} {
		b.Run(p.name, func(b *testing.B) {
			s := startOn(b, p.onSQL)
			c := s.client("Seat")
			var waits []time.Duration
			for i := range b.N {
				s.seatHold.Rearm()
				key := fmt.Sprintf("seat-%d", i)
				done := make(chan error, 1)
				go func() {
					_, err := send(b.Context(), c, "acct_1", key, 300)
					done <- err
				}()
				<-s.seatHold.Reached()
				ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
				start := time.Now()
				_, err := send(ctx, c, "acct_1", key, 300)
				waits = append(waits, time.Since(start))
				cancel()
				require.Equal(b, connect.CodeAborted, connect.CodeOf(err), "twin: %v", err)
				s.seatHold.Release()
				require.NoError(b, <-done)
			}
			idemtest.ReportWaits(b, waits, 300*time.Millisecond)
		})
	}
}
