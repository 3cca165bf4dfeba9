package main

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// Keys in the scale and sweep experiments are spread over the whole key
// space, as random client keys (UUIDs) are: a claim inserts into a random
// leaf of the primary key, not always its rightmost one.

// loadedKey is the key of the i-th bulk-loaded row: md5(i) in hex, which
// the server computes while loading.
func loadedKey(i int) string {
	sum := md5.Sum([]byte(strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// freshKey is the key of the i-th claim of an experiment: never a loaded one.
func freshKey(i int) string {
	sum := sha256.Sum256([]byte("claim-" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:16])
}

// bulkLoad inserts rows ledger rows of chargeMethod with loadedKey keys
// first..first+rows-1, in one INSERT … SELECT generate_series. expired rows
// ended their retention an hour ago. With rebuild the primary key and the
// indexes are dropped first and built again after the load (the fast way
// to make a big table); without, rows go through the live indexes as
// traffic's do.
func bulkLoad(ctx context.Context, db *idemtest.DB, first, rows int, expired, rebuild bool) error {
	if rows == 0 {
		return nil
	}
	l, err := ledger.New(ledger.DefaultTable)
	if err != nil {
		return err
	}
	resp, err := json.Marshal(Receipt{PaymentID: 1, Amount: 100})
	if err != nil {
		return err
	}
	expires := "now() + interval '48 hours'"
	if expired {
		expires = "now() - interval '1 hour'"
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '512MB'"); err != nil {
		return err
	}
	var pre, post []string
	if rebuild {
		pre = append(pre, fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", l.Table.Quoted(), ledger.Quote(l.PrimaryKeyName())))
		post = append(post, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s PRIMARY KEY (%s)", l.Table.Quoted(), ledger.Quote(l.PrimaryKeyName()), quoteAll(l.Key)))
		for _, ix := range l.Indexes {
			pre = append(pre, "DROP INDEX "+l.Table.QuotedDerived(ix.Suffix))
			post = append(post, l.CreateIndexSQL(ix, false))
		}
	}
	for _, s := range pre {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("load: %s: %w", s, err)
		}
	}
	insert := fmt.Sprintf(`INSERT INTO %s (scope, method, key, fingerprint, status, response, created_at, expires_at, intention)
SELECT '', $1, md5(i::text), $2, 'done', $3, now() - interval '1 day', %s, gen_random_uuid()
FROM generate_series($4::bigint, $5::bigint) AS i`, l.Table.Quoted(), expires)
	if _, err := conn.Exec(ctx, insert, chargeMethod().Name, fingerprint(), resp, first, first+rows-1); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for _, s := range post {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("load: %s: %w", s, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+l.Table.Quoted()); err != nil {
		return fmt.Errorf("load: vacuum: %w", err)
	}
	// Write the loaded pages out now, not in a checkpoint during the
	// measurement that follows.
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("load: checkpoint: %w", err)
	}
	return nil
}

// prewarm reads the ledger and its indexes into shared buffers
// (pg_prewarm), so that what is measured is the ledger's size, not the
// first read of each page a bulk load left on disk (a load, CREATE INDEX
// and VACUUM go through a small ring of buffers, not the cache). The
// server's shared_buffers must hold them (-pg shared_buffers=…).
func prewarm(ctx context.Context, db *idemtest.DB) error {
	if _, err := db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_prewarm"); err != nil {
		return fmt.Errorf("prewarm: %w", err)
	}
	_, err := db.Pool.Exec(ctx, `SELECT pg_prewarm(c.oid) FROM pg_class c
WHERE c.oid = $1::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass)`, ledger.DefaultTable)
	if err != nil {
		return fmt.Errorf("prewarm: %w", err)
	}
	return nil
}

func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = ledger.Quote(c)
	}
	return strings.Join(q, ", ")
}

// faultsText prints page faults per call, or n/a when they could not be
// counted (negative).
func faultsText(f float64) string {
	if f < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// scaleConcurrency are the goroutine counts of the scale experiment.
var scaleConcurrency = []int{1, 16}

// scale measures claims and replays with the ledger already holding each
// of -scale.rows rows.
func (b *bench) scale(ctx context.Context) error {
	fmt.Fprintf(b.w, "\n## Claim and replay against the ledger's size\n\n")
	fmt.Fprintf(b.w, "%d calls per line; claims use fresh random keys, replays random loaded keys (on the empty ledger, keys claimed first).\n\n", b.cfg.scaleOps)
	type line struct {
		rows int
		r    result
	}
	var lines []line
	for _, n := range b.cfg.scaleRows {
		rs, err := b.scaleOne(ctx, n)
		if err != nil {
			return fmt.Errorf("%d rows: %w", n, err)
		}
		for _, r := range rs {
			lines = append(lines, line{rows: n, r: r})
		}
	}
	first := map[string]result{}
	for _, l := range lines {
		k := l.r.path + "/" + strconv.Itoa(l.r.concurrency)
		if _, ok := first[k]; !ok {
			first[k] = l.r
		}
	}
	fmt.Fprintf(b.w, "\n| ledger rows | path | goroutines | calls | p50 µs | p99 µs | calls/s | p50 ÷ %d rows | p99 ÷ %d rows | server page faults per call |\n", b.cfg.scaleRows[0], b.cfg.scaleRows[0])
	fmt.Fprintln(b.w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, l := range lines {
		f := first[l.r.path+"/"+strconv.Itoa(l.r.concurrency)]
		fmt.Fprintf(b.w, "| %d | %s | %d | %d | %s | %s | %.0f | %.2f | %.2f | %s |\n", l.rows, l.r.path, l.r.concurrency, l.r.ops,
			micros(l.r.p50), micros(l.r.p99), l.r.throughput(), float64(l.r.p50)/float64(f.p50), float64(l.r.p99)/float64(f.p99), faultsText(l.r.faults))
	}
	return nil
}

func (b *bench) scaleOne(ctx context.Context, rows int) (_ []result, err error) {
	db, err := b.newDB(ctx, fmt.Sprintf("scale_%d", rows), idemtest.WithSetup(paymentsDDL))
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	if err := bulkLoad(ctx, db, 1, rows, false, true); err != nil {
		return nil, err
	}
	var size int64
	if err := db.Pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", ledger.DefaultTable).Scan(&size); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.w, "%d rows loaded in %s (table and indexes %s)\n", rows, time.Since(start).Round(time.Second), mib(size))
	if b.cfg.scalePrewarm {
		if err := prewarm(ctx, db); err != nil {
			return nil, err
		}
	}

	s, err := idem.NewStore(db.Pool)
	if err != nil {
		return nil, err
	}
	m, fp := chargeMethod(), fingerprint()
	claim := func(ctx context.Context, i int) error {
		_, err := idem.Atomic(idem.ContextWithKey(ctx, freshKey(i)), s, m, fp, charge)
		return err
	}
	// Replays: random loaded rows; on an empty ledger, keys claimed now.
	replayable, keyOf := rows, loadedKey
	if rows == 0 {
		replayable, keyOf = min(b.cfg.scaleOps, replayKeys), replayKey
		for i := range replayable {
			if _, err := idem.Atomic(idem.ContextWithKey(ctx, replayKey(i)), s, m, fp, charge); err != nil {
				return nil, err
			}
		}
	} else {
		keyOf = func(i int) string { return loadedKey(i + 1) }
	}
	replay := func(ctx context.Context, _ int) error {
		ctx, out := idem.ContextWithOutcome(idem.ContextWithKey(ctx, keyOf(rand.IntN(replayable))))
		if _, err := idem.Atomic(ctx, s, m, fp, charge); err != nil {
			return err
		}
		if !out.Replayed() {
			return errors.New("replay: the call was not a replay")
		}
		return nil
	}
	var claims, replays counter
	var out []result
	for _, c := range scaleConcurrency {
		for _, p := range []struct {
			name string
			fn   op
			keys *counter
		}{{"claimed", claim, &claims}, {"replay", replay, &replays}} {
			if _, err := measure(ctx, p.fn, p.keys, c, load{ops: max(2*c, min(200, b.cfg.scaleOps/10))}); err != nil {
				return nil, err
			}
			if b.cfg.pgss {
				if err := resetStatements(ctx, db); err != nil {
					return nil, err
				}
			}
			f0, _, fok, err := serverProcs(ctx, db)
			if err != nil {
				return nil, err
			}
			r, err := measure(ctx, p.fn, p.keys, c, load{ops: b.cfg.scaleOps})
			if err != nil {
				return nil, err
			}
			f1, _, fok1, err := serverProcs(ctx, db)
			if err != nil {
				return nil, err
			}
			r.path, r.faults = p.name, -1
			if fok && fok1 {
				r.faults = float64(f1-f0) / float64(r.ops)
			}
			out = append(out, r)
			fmt.Fprintf(b.w, "%d rows, %-7s %2d goroutines: p50 %sµs, p99 %sµs, server page faults %s per call\n",
				rows, p.name, c, micros(r.p50), micros(r.p99), faultsText(r.faults))
			if b.cfg.pgss {
				if err := writeStatements(ctx, b.w, db, fmt.Sprintf("%d rows, %s, %d goroutines", rows, p.name, c), int64(r.ops)); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// sweep deletes -sweep.rows expired rows with Sweep while live claims run,
// twice, and reports live latency before and during the first sweep and the
// ledger's size at each stage.
func (b *bench) sweep(ctx context.Context) (err error) {
	fmt.Fprintf(b.w, "\n## Sweep of %d expired rows under live claims\n\n", b.cfg.sweepRows)
	db, err := b.newDB(ctx, "sweep", idemtest.WithSetup(paymentsDDL))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	s, err := idem.NewStore(db.Pool, idem.WithSweepShare(b.cfg.sweepShare))
	if err != nil {
		return err
	}
	m, fp := chargeMethod(), fingerprint()
	var keys counter
	claim := func(ctx context.Context, i int) error {
		_, err := idem.Atomic(idem.ContextWithKey(ctx, freshKey(i)), s, m, fp, charge)
		return err
	}
	type stage struct {
		name string
		st   tableStat
	}
	var stages []stage
	snap := func(name string) error {
		st, err := tableStats(ctx, db, ledger.DefaultTable, 0)
		if err != nil {
			return err
		}
		if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+ledger.Quote(ledger.DefaultTable)).Scan(&st.rows); err != nil {
			return err
		}
		stages = append(stages, stage{name, st})
		return nil
	}
	c := b.cfg.sweepConcurrency
	if err := snap("empty"); err != nil {
		return err
	}
	for cycle := 1; cycle <= b.cfg.sweepCycles; cycle++ {
		start := time.Now()
		if err := bulkLoad(ctx, db, 1+(cycle-1)*b.cfg.sweepRows, b.cfg.sweepRows, true, false); err != nil {
			return err
		}
		fmt.Fprintf(b.w, "cycle %d: %d expired rows loaded through the live indexes in %s\n", cycle, b.cfg.sweepRows, time.Since(start).Round(time.Second))
		if err := snap(fmt.Sprintf("cycle %d: loaded", cycle)); err != nil {
			return err
		}
		// Warm up, then live claims alone, then live claims during the sweep.
		if _, err := measure(ctx, claim, &keys, c, load{ops: 20 * c}); err != nil {
			return err
		}
		before, err := measure(ctx, claim, &keys, c, load{duration: b.cfg.sweepBefore})
		if err != nil {
			return err
		}
		done := make(chan struct{})
		var swept int64
		var sweepErr error
		var sweepTime time.Duration
		go func() {
			defer close(done)
			t0 := time.Now()
			swept, sweepErr = s.Sweep(ctx, 0)
			sweepTime = time.Since(t0)
		}()
		during, err := measure(ctx, claim, &keys, c, load{until: done})
		<-done
		if err != nil {
			return err
		}
		if sweepErr != nil {
			return fmt.Errorf("sweep: %w", sweepErr)
		}
		// Live claims alone again: the machine's own drift over the
		// sweep's minutes shows as a difference between before and after.
		after, err := measure(ctx, claim, &keys, c, load{duration: b.cfg.sweepBefore})
		if err != nil {
			return err
		}
		fmt.Fprintf(b.w, "cycle %d: Sweep deleted %d rows in %s (batches of %d, sweep share %g)\n", cycle, swept, sweepTime.Round(time.Millisecond), idem.DefaultSweepBatch, b.cfg.sweepShare)
		fmt.Fprintf(b.w, "cycle %d: live claims from %d goroutines: before the sweep %d calls, p50 %sµs, p99 %sµs; during it %d calls, p50 %sµs, p99 %sµs; after it %d calls, p50 %sµs, p99 %sµs (p99 during ÷ before %.2f, ÷ after %.2f)\n",
			cycle, c, before.ops, micros(before.p50), micros(before.p99), during.ops, micros(during.p50), micros(during.p99),
			after.ops, micros(after.p50), micros(after.p99), float64(during.p99)/float64(before.p99), float64(during.p99)/float64(after.p99))
		if err := snap(fmt.Sprintf("cycle %d: swept", cycle)); err != nil {
			return err
		}
		vacuumed, err := b.vacuum(ctx, db, stages[len(stages)-1].st.autovacuums)
		if err != nil {
			return err
		}
		if err := snap(fmt.Sprintf("cycle %d: %s", cycle, vacuumed)); err != nil {
			return err
		}
	}
	fmt.Fprintln(b.w, "\n| stage | rows | dead rows | heap | indexes | total | autovacuum runs |")
	fmt.Fprintln(b.w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, st := range stages {
		fmt.Fprintf(b.w, "| %s | %d | %d | %s | %s | %s | %d |\n", st.name, st.st.rows, st.st.dead, mib(st.st.heap), mib(st.st.indexes), mib(st.st.total), st.st.autovacuums)
	}
	var reloptions []string
	if err := db.Pool.QueryRow(ctx, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass", ledger.DefaultTable).Scan(&reloptions); err != nil {
		return err
	}
	fmt.Fprintf(b.w, "\nledger storage settings: %s\n", strings.Join(reloptions, ", "))
	return nil
}

// vacuum waits up to -sweep.autovacuum for autovacuum to run on the ledger
// (its count to pass before), or runs VACUUM when that is 0 or autovacuum
// did not come in time, and says which it was.
func (b *bench) vacuum(ctx context.Context, db *idemtest.DB, before int64) (string, error) {
	if wait := b.cfg.sweepAutovacuum; wait > 0 {
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			var n int64
			if err := db.Pool.QueryRow(ctx, "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass", ledger.DefaultTable).Scan(&n); err != nil {
				return "", err
			}
			if n > before {
				return "autovacuumed", nil
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM "+ledger.Quote(ledger.DefaultTable)); err != nil {
		return "", fmt.Errorf("vacuum: %w", err)
	}
	return "vacuumed", nil
}
