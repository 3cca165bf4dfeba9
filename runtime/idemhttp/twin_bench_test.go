package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// BenchmarkTwinOfAHolder times the in-progress answer a twin gets while the
// first call of its key holds the seat's row inside its body (what
// TestTwinOfAHolderOverHTTP checks is a 409 with Retry-After): each
// iteration holds a first call on a new key, sends the twin and times it
// from its send to its answer. The store's claim wait is 300 ms, the bound
// the twin's wait is reported against (idemtest.ReportWaits). Run it with:
//
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemhttp
func BenchmarkTwinOfAHolder(b *testing.B) {
	const claimWait = 300 * time.Millisecond
	a := newAPI(b, func(db *idemtest.DB) *idem.Store {
		s, err := idem.NewStore(db.Pool, idem.WithClaimWait(claimWait))
		require.NoError(b, err)
		return s
	})
	var waits []time.Duration
	for i := range b.N {
		a.seatHold.Rearm()
		key := fmt.Sprintf("seat-%d", i)
		done := make(chan error, 1)
		go func() {
			_, err := a.send(b.Context(), "/seats", "acct_1", key, 300)
			done <- err
		}()
		<-a.seatHold.Reached()
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		start := time.Now()
		twin, err := a.send(ctx, "/seats", "acct_1", key, 300)
		waits = append(waits, time.Since(start))
		cancel()
		require.NoError(b, err)
		require.Equal(b, http.StatusConflict, twin.status, twin.body)
		a.seatHold.Release()
		require.NoError(b, <-done)
	}
	idemtest.ReportWaits(b, waits, claimWait)
}
