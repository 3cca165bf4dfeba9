package idemtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// ExampleClock is the Clock's doc example: a store reading the clock, which
// steps past a 48h retention window without sleeping. (A test passes
// db.Pool from idemtest.New; this pool is never dialled.)
func ExampleClock() {
	pool, err := pgxpool.New(context.Background(), "host=/nonexistent dbname=app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	clock := idemtest.NewClock(time.Time{})
	store, err := idem.NewStore(pool, idem.WithClock(clock.Now))
	if err != nil {
		panic(err)
	}
	clock.Advance(49 * time.Hour)
	fmt.Println(store.Ledger().Table, clock.Now().Format(time.RFC3339))
	// Output: idempotency_keys 2026-03-16T10:26:53Z
}
