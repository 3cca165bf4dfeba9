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
// TestTwinOfAHolderOverHTTP checks is a 409 with Retry-After), against the
// store's claim wait of 300 ms (idemtest.BenchTwinsOfAHolder). Run it with:
//
//	go test -run '^$' -bench TwinOfAHolder -benchtime 20x ./runtime/idemhttp
func BenchmarkTwinOfAHolder(b *testing.B) {
	const claimWait = 300 * time.Millisecond
	a := newAPI(b, func(db *idemtest.DB) *idem.Store {
		s, err := idem.NewStore(db.Pool, idem.WithClaimWait(claimWait))
		require.NoError(b, err)
		return s
	})
	// seat posts a seat request and wants the given status.
	seat := func(want int) func(ctx context.Context, key string) error {
		return func(ctx context.Context, key string) error {
			r, err := a.send(ctx, "/seats", "acct_1", key, 300)
			if err == nil && r.status != want {
				err = fmt.Errorf("status %d, want %d: %s", r.status, want, r.body)
			}
			return err
		}
	}
	idemtest.BenchTwinsOfAHolder(b, a.seatHold, claimWait, seat(http.StatusCreated), seat(http.StatusConflict))
}
