package idemledger

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
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

// Listing is what list prints: both lists, each up to the limit, and the
// database's clock.
type Listing struct {
	InProgress []Listed  `json:"in_progress"` // oldest first
	Expired    []Listed  `json:"expired"`     // longest expired first
	Now        time.Time `json:"now"`
}

func (e *env) listCmd(c *common) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	limit := fs.Int("limit", 50, "at most this many rows in each list")
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		if len(args) > 0 {
			return fail(ExitUsage, "list takes no arguments (got %q)", args)
		}
		tables, err := findTables(ctx, db, c.table)
		if err != nil {
			return err
		}
		l := Listing{InProgress: []Listed{}, Expired: []Listed{}}
		if err := db.QueryRow(ctx, "SELECT now()").Scan(&l.Now); err != nil {
			return fmt.Errorf("read the clock: %w", err)
		}
		for _, t := range tables {
			if err := listTable(ctx, db, t, c.retention, *limit, &l); err != nil {
				return err
			}
		}
		if c.json {
			return e.writeJSON(l)
		}
		return printListing(e.stdout, l)
	}
}

// listTable appends t's in-progress claims (a ledger's only: an inline claim
// commits with its work) and expired keys, each up to limit.
func listTable(ctx context.Context, db *pgx.Conn, t table, retention time.Duration, limit int, l *Listing) error {
	q := t.id.Quoted()
	type query struct {
		sql  string
		args []any
		into *[]Listed
	}
	var queries []query
	if t.inline {
		key, scope, at := ledger.Quote(ledger.InlineKeyColumn), ledger.Quote(ledger.InlineScopeColumn), ledger.Quote(ledger.InlineClaimedAtColumn)
		queries = append(queries, query{fmt.Sprintf(`SELECT %[2]s, '', %[3]s, %[4]s, %[4]s + $2::bigint * interval '1 microsecond', NULL::timestamptz, 0::bigint
FROM %[1]s WHERE %[3]s IS NOT NULL AND %[4]s + $2::bigint * interval '1 microsecond' <= now() ORDER BY %[4]s LIMIT $1`, q, scope, key, at), []any{limit, retention.Microseconds()}, &l.Expired})
	} else {
		const cols = `scope, method, key, created_at, expires_at, locked_until, fence`
		queries = append(queries,
			query{fmt.Sprintf(`SELECT %s FROM %s WHERE status = 'in_progress' ORDER BY created_at LIMIT $1`, cols, q), []any{limit}, &l.InProgress},
			query{fmt.Sprintf(`SELECT %s FROM %s WHERE expires_at <= now() AND (locked_until IS NULL OR locked_until <= now())
ORDER BY expires_at LIMIT $1`, cols, q), []any{limit}, &l.Expired})
	}
	for _, qu := range queries {
		rows, err := db.Query(ctx, qu.sql, qu.args...)
		if err != nil {
			return fmt.Errorf("list %s: %w", t.Name(), err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
			x := Listed{Table: t.Name(), Mode: t.Mode()}
			err := r.Scan(&x.Scope, &x.Method, &x.Key, &x.CreatedAt, &x.ExpiresAt, &x.LockedUntil, &x.Fence)
			x.LockLive = x.LockedUntil != nil && x.LockedUntil.After(l.Now)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", t.Name(), err)
		}
		*qu.into = append(*qu.into, got...)
	}
	return nil
}

func printListing(w io.Writer, l Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "IN PROGRESS (oldest first): %d\n", len(l.InProgress))
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
	fmt.Fprintf(tw, "\nEXPIRED, WAITING FOR THE SWEEP (longest first): %d\n", len(l.Expired))
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
