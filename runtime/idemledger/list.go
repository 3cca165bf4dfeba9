package idemledger

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listed is one row of list: an in-progress claim, or an expired key
// waiting for the sweep.
type Listed struct {
	Table       string     `json:"table"`
	Mode        string     `json:"mode"`
	Scope       string     `json:"scope"`
	Method      string     `json:"method,omitempty"`
	Key         string     `json:"key"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	LockedUntil *time.Time `json:"locked_until,omitempty"`
	LockLive    bool       `json:"lock_live"`
	Fence       int64      `json:"fence,omitempty"`
}

// Listing is what list prints: both lists, each cut to the limit, with
// the total of each, and the database's clock.
type Listing struct {
	InProgress      []Listed  `json:"in_progress"`       // oldest first
	InProgressTotal int64     `json:"in_progress_total"` // every in-progress claim, listed or not
	Expired         []Listed  `json:"expired"`           // longest expired first
	ExpiredTotal    int64     `json:"expired_total"`     // every expired key, listed or not
	Limit           int       `json:"limit"`             // the -limit each list was cut to
	Now             time.Time `json:"now"`
}

func (e *env) listCmd(c *common) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	limit := fs.Int("limit", 50, "at most this many rows in each list (0: the totals only)")
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		if len(args) > 0 {
			return fail(ExitUsage, "list takes no arguments (got %q)", args)
		}
		if *limit < 0 {
			return fail(ExitUsage, "list: -limit %d: want 0 (the totals only) or more", *limit)
		}
		tables, err := findTables(ctx, db, c.table)
		if err != nil {
			return err
		}
		l := Listing{InProgress: []Listed{}, Expired: []Listed{}, Limit: *limit}
		if err := db.QueryRow(ctx, "SELECT now()").Scan(&l.Now); err != nil {
			return fmt.Errorf("read the clock: %w", err)
		}
		for _, t := range tables {
			if err := listTable(ctx, db, t, c.retention, *limit, &l); err != nil {
				return err
			}
		}
		l.InProgress = cut(l.InProgress, *limit, func(x Listed) time.Time { return x.CreatedAt })
		l.Expired = cut(l.Expired, *limit, func(x Listed) time.Time { return x.ExpiresAt })
		if c.json {
			return e.writeJSON(l)
		}
		return printListing(e.stdout, l)
	}
}

// cut sorts the rows of every table by at (then by table, scope, method and
// key, so the order is stable) and keeps the first limit: each table gave
// its first limit, so these are the first limit of all.
func cut(xs []Listed, limit int, at func(Listed) time.Time) []Listed {
	slices.SortStableFunc(xs, func(a, b Listed) int {
		return cmp.Or(at(a).Compare(at(b)), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Scope, b.Scope),
			cmp.Compare(a.Method, b.Method), cmp.Compare(a.Key, b.Key))
	})
	return xs[:min(limit, len(xs))]
}

// listTable appends t's in-progress claims (a ledger's only: an inline claim
// commits with its work) and expired keys, each up to limit, and adds t's
// totals.
//
// Each total comes with the rows, from the same statement (a window count),
// so it costs no read of its own: the ledger has no index on status (one
// would cost every claim a write), so listing the in-progress claims reads
// the whole table anyway, and the count holds the matching rows (normally
// few) for the sort; the expired rows are read through the expires_at index,
// all of them for the count, which the sweep keeps few. An inline table has
// no index on the claim time, so its expired keys are a scan of the table.
// The statement asks for at least one row, so the total comes back with
// -limit 0 too; the rows past limit are dropped here.
func listTable(ctx context.Context, db *pgx.Conn, t table, retention time.Duration, limit int, l *Listing) error {
	type query struct {
		sql   string
		args  []any
		into  *[]Listed
		total *int64
	}
	var queries []query
	if t.inline {
		queries = append(queries, query{t.inlineStatements().ListExpired, []any{limit, retention.Microseconds()}, &l.Expired, &l.ExpiredTotal})
	} else {
		st := t.statements()
		queries = append(queries,
			query{st.ListInProgress, []any{limit}, &l.InProgress, &l.InProgressTotal},
			query{st.ListExpired, []any{limit}, &l.Expired, &l.ExpiredTotal})
	}
	for _, qu := range queries {
		rows, err := db.Query(ctx, qu.sql, qu.args...)
		if err != nil {
			return fmt.Errorf("list %s: %w", t.Name(), err)
		}
		var total int64
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
			x := Listed{Table: t.Name(), Mode: t.Mode()}
			err := r.Scan(&x.Scope, &x.Method, &x.Key, &x.CreatedAt, &x.ExpiresAt, &x.LockedUntil, &x.Fence, &total)
			x.LockLive = x.LockedUntil != nil && x.LockedUntil.After(l.Now)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", t.Name(), err)
		}
		*qu.into = append(*qu.into, got[:min(limit, len(got))]...)
		*qu.total += total
	}
	return nil
}

// header is a list's title line: how many rows are shown of how many, and
// whether the list was cut.
func header(title, order string, shown int, total int64, limit int) string {
	switch {
	case total == 0:
		return title + ": none"
	case limit == 0:
		return fmt.Sprintf("%s: %s (not listed: -limit 0)", title, thousands(total))
	case int64(shown) == total:
		return fmt.Sprintf("%s (%s): all %s", title, order, thousands(total))
	}
	return fmt.Sprintf("%s (%s): %s of %s, cut at -limit %d", title, order, thousands(int64(shown)), thousands(total), limit)
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func printListing(w io.Writer, l Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header("IN PROGRESS", "oldest first", len(l.InProgress), l.InProgressTotal, l.Limit))
	if len(l.InProgress) > 0 {
		fmt.Fprintln(tw, "TABLE\tMETHOD\tSCOPE\tKEY\tCLAIMED\tLOCK\tFENCE")
	}
	for _, x := range l.InProgress {
		lock := "expired: a retry takes over"
		if x.LockLive {
			lock = "live for " + x.LockedUntil.Sub(l.Now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%q\t%s ago\t%s\t%d\n", x.Table, x.Method, x.Scope, x.Key, l.Now.Sub(x.CreatedAt).Round(time.Second), lock, x.Fence)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, header("EXPIRED, WAITING FOR THE SWEEP", "longest first", len(l.Expired), l.ExpiredTotal, l.Limit))
	if len(l.Expired) > 0 {
		fmt.Fprintln(tw, "TABLE\tMETHOD\tSCOPE\tKEY\tEXPIRED")
	}
	for _, x := range l.Expired {
		method := x.Method
		if x.Mode == "inline" {
			method = "(inline)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%q\t%s ago\n", x.Table, method, x.Scope, x.Key, l.Now.Sub(x.ExpiresAt).Round(time.Second))
	}
	return tw.Flush()
}
