package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// resetStatements empties pg_stat_statements.
func resetStatements(ctx context.Context, db *idemtest.DB) error {
	if _, err := db.Pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return fmt.Errorf("pg_stat_statements: reset: %w", err)
	}
	return nil
}

// writeStatements prints the statements of db's database by the server time
// they took (planning plus execution) since the last reset, and that time
// per call of the path (calls counts the path's calls, warm-up included).
func writeStatements(ctx context.Context, w io.Writer, db *idemtest.DB, path string, calls int64) error {
	rows, err := db.Pool.Query(ctx, `
SELECT query, calls, plans, total_plan_time + total_exec_time AS total_ms,
       mean_exec_time * 1000 AS exec_us, CASE WHEN plans > 0 THEN total_plan_time * 1000 / plans ELSE 0 END AS plan_us
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'
ORDER BY total_ms DESC`)
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	type stmt struct {
		query                 string
		calls, plans          int64
		totalMS, execUS, plan float64
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stmt, error) {
		var s stmt
		err := r.Scan(&s.query, &s.calls, &s.plans, &s.totalMS, &s.execUS, &s.plan)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	var total float64
	for _, s := range all {
		total += s.totalMS
	}
	fmt.Fprintf(w, "\n%s: server time (pg_stat_statements, planning + execution) %.1f µs per call over %d calls\n\n", path, total*1000/float64(max(calls, 1)), calls)
	fmt.Fprintln(w, "| statement | executions per call | µs per execution | plans per call | µs per plan | share of server time |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for i, s := range all {
		if i == 8 {
			break
		}
		share := 0.0
		if total > 0 {
			share = 100 * s.totalMS / total
		}
		fmt.Fprintf(w, "| `%s` | %.2f | %.1f | %.2f | %.1f | %.0f%% |\n", shorten(s.query, 90),
			float64(s.calls)/float64(max(calls, 1)), s.execUS, float64(s.plans)/float64(max(calls, 1)), s.plan, share)
	}
	fmt.Fprintln(w)
	return nil
}

// shorten puts a statement on one line of at most n characters.
func shorten(q string, n int) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > n {
		q = q[:n-1] + "…"
	}
	return strings.ReplaceAll(q, "|", `\|`)
}

// tableStat is what the server counted for one table, and its size.
type tableStat struct {
	inserts, updates, hotUpdates, dead int64
	autovacuums                        int64
	heap, indexes, total               int64
	rows                               int64 // counted by the caller, when it needs them
}

// hotPercent is the share of updates that were HOT.
func (s tableStat) hotPercent() float64 {
	if s.updates == 0 {
		return 0
	}
	return 100 * float64(s.hotUpdates) / float64(s.updates)
}

func (s tableStat) String() string {
	return fmt.Sprintf("%d inserts, %d updates of which %d HOT (%.0f%%), %d dead rows; heap %s, indexes %s, total %s",
		s.inserts, s.updates, s.hotUpdates, s.hotPercent(), s.dead, mib(s.heap), mib(s.indexes), mib(s.total))
}

// mib formats a size in bytes as MiB, or KiB below 1 MiB.
func mib(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// statsWait bounds the wait for the server's statistics to count every insert.
const statsWait = 30 * time.Second

// tableStats returns the counters and size of table. Backends report their
// counters when idle or when they exit, so the pool's connections are
// closed first and the counters read until they show at least wantInserts
// inserts (or statsWait passes: then what was counted is returned).
func tableStats(ctx context.Context, db *idemtest.DB, table string, wantInserts int64) (tableStat, error) {
	db.Pool.Reset()
	var s tableStat
	deadline := time.Now().Add(statsWait)
	for {
		err := db.Pool.QueryRow(ctx, `
SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, autovacuum_count,
       pg_relation_size(relid), pg_indexes_size(relid), pg_total_relation_size(relid)
FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(
			&s.inserts, &s.updates, &s.hotUpdates, &s.dead, &s.autovacuums, &s.heap, &s.indexes, &s.total)
		if err != nil {
			return s, fmt.Errorf("statistics of %s: %w", table, err)
		}
		if s.inserts >= wantInserts || time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverProcs returns what the server's processes (those pg_stat_activity
// lists) have used so far, from Linux's /proc/PID: minor page faults (stat)
// and CPU time. A backend takes a minor fault whenever it first touches a
// page of shared memory it has not mapped yet: with 4 KiB pages a new
// connection faults its way into every buffer it reads, which is what makes
// first reads of a big prewarmed ledger slow; huge pages (huge_pages=on and
// vm.nr_hugepages) map 2 MiB at a fault. The CPU time is the scheduler's
// own account in nanoseconds (schedstat), not stat's utime and stime: those
// are sampled in ticks of 10 ms, which made a run of 1,000 calls at about
// 80 µs of server time each a count of 8 ticks, 12% a tick (procCPU). ok is
// false where /proc cannot be read (another OS, or the server on another
// machine).
func serverProcs(ctx context.Context, db *idemtest.DB) (faults int64, cpu time.Duration, ok bool, err error) {
	rows, err := db.Pool.Query(ctx, "SELECT pid FROM pg_stat_activity")
	if err != nil {
		return 0, 0, false, fmt.Errorf("server processes: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, 0, false, fmt.Errorf("server processes: %w", err)
	}
	for _, pid := range pids {
		f, c, err := procUsage(pid)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && len(pids) > 1 {
				continue // the process ended since the query
			}
			return 0, 0, false, nil
		}
		faults += f
		cpu += c
	}
	return faults, cpu, true, nil
}

// procUsage reads one process's minor page faults and CPU time.
func procUsage(pid int32) (faults int64, cpu time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command's closing parenthesis, from field 3
	// (state): minflt is field 10, utime and stime 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var n [3]int64
	for i, field := range []int{7, 11, 12} {
		if n[i], err = strconv.ParseInt(f[field], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	if ns, ok := procCPU(pid); ok {
		return n[0], ns, nil
	}
	// utime and stime count USER_HZ ticks, 100 a second on Linux.
	return n[0], time.Duration(n[1]+n[2]) * (time.Second / 100), nil
}

// procCPU reads the nanoseconds a process has run on a CPU from
// /proc/PID/schedstat (its first field); ok is false where the kernel
// does not keep it.
func procCPU(pid int32) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}
