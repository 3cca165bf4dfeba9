package main

import (
	"context"
	"fmt"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// hotConcurrency is the number of goroutines claiming keys in the hot
// experiment.
const hotConcurrency = 8

// hot claims -hot.ops keys on a fresh ledger for each fillfactor and reports
// how many response writes were HOT updates (no index entry written, the
// page's space reused without VACUUM) and how big the table grew.
func (b *bench) hot(ctx context.Context) error {
	fmt.Fprintf(b.w, "\n## Ledger writes against the ledger's fillfactor\n\n")
	fmt.Fprintf(b.w, "%d claims per fillfactor from %d goroutines, on a fresh ledger each. Atomic mode writes a key's row once, with COMMIT: an update is a second write of the row (the claim-first runtime's response write, a HOT update since it touched no indexed column).\n\n", b.cfg.hotOps, hotConcurrency)
	fmt.Fprintln(b.w, "| fillfactor | claims | updates | HOT updates | HOT % | heap | indexes | total | p50 µs | calls/s |")
	fmt.Fprintln(b.w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, ff := range b.cfg.fillfactors {
		if err := b.hotOne(ctx, ff); err != nil {
			return fmt.Errorf("fillfactor %d: %w", ff, err)
		}
	}
	return nil
}

func (b *bench) hotOne(ctx context.Context, fillfactor int) (err error) {
	setFill := fmt.Sprintf("ALTER TABLE %s SET (fillfactor = %d)", ledger.Quote(ledger.DefaultTable), fillfactor)
	db, err := b.newDB(ctx, fmt.Sprintf("hot_%d", fillfactor), idemtest.WithSetup(paymentsDDL, setFill))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	fn, err := prepareClaimed(ctx, db, 0)
	if err != nil {
		return err
	}
	var keys counter
	r, err := measure(ctx, fn, &keys, hotConcurrency, load{ops: b.cfg.hotOps})
	if err != nil {
		return err
	}
	st, err := tableStats(ctx, db, ledger.DefaultTable, keys.n.Load())
	if err != nil {
		return err
	}
	fmt.Fprintf(b.w, "| %d | %d | %d | %d | %.1f%% | %s | %s | %s | %s | %.0f |\n",
		fillfactor, r.ops, st.updates, st.hotUpdates, st.hotPercent(), mib(st.heap), mib(st.indexes), mib(st.total), micros(r.p50), r.throughput())
	return nil
}
