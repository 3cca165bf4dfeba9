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

// MethodStats counts one method's keys (an inline table counts as one
// method, named after the table).
type MethodStats struct {
	Table      string `json:"table"`
	Mode       string `json:"mode"`
	Method     string `json:"method"`
	Rows       int64  `json:"rows"` // keys held (inline: rows that carry a key)
	InProgress int64  `json:"in_progress"`
	Expired    int64  `json:"expired"` // waiting for the sweep
}

// TableStats is one table's size and vacuum state.
type TableStats struct {
	Table          string     `json:"table"`
	Mode           string     `json:"mode"`
	TableBytes     int64      `json:"table_bytes"` // heap and TOAST
	IndexBytes     int64      `json:"index_bytes"` // every index of the table
	KeyIndexBytes  int64      `json:"key_index_bytes"`
	LiveTuples     int64      `json:"live_tuples"`
	DeadTuples     int64      `json:"dead_tuples"`
	LastAutovacuum *time.Time `json:"last_autovacuum"`
	LastVacuum     *time.Time `json:"last_vacuum"`
}

// Stats is what stats prints.
type Stats struct {
	Methods []MethodStats `json:"methods"`
	Tables  []TableStats  `json:"tables"`
}

func (e *env) statsCmd(c *common) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		if len(args) > 0 {
			return fail(ExitUsage, "stats takes no arguments (got %q)", args)
		}
		tables, err := findTables(ctx, db, c.table)
		if err != nil {
			return err
		}
		st := Stats{Methods: []MethodStats{}, Tables: []TableStats{}}
		for _, t := range tables {
			ms, err := methodStats(ctx, db, t, c.retention)
			if err != nil {
				return err
			}
			ts, err := tableStats(ctx, db, t)
			if err != nil {
				return err
			}
			st.Methods = append(st.Methods, ms...)
			st.Tables = append(st.Tables, ts)
		}
		if c.json {
			return e.writeJSON(st)
		}
		return printStats(e.stdout, st)
	}
}

// methodStats counts t's keys per method. It reads the whole table (the
// counts are exact), bounded by -timeout like every statement.
func methodStats(ctx context.Context, db *pgx.Conn, t table, retention time.Duration) ([]MethodStats, error) {
	sql := t.statements().MethodStats
	var args []any
	if t.inline {
		sql, args = t.inlineStatements().MethodStats, []any{retention.Microseconds(), "(" + t.Name() + ")"}
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", t.Name(), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MethodStats, error) {
		m := MethodStats{Table: t.Name(), Mode: t.Mode()}
		return m, r.Scan(&m.Method, &m.Rows, &m.InProgress, &m.Expired)
	})
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", t.Name(), err)
	}
	return out, nil
}

// tableStats reads t's sizes and vacuum state from the statistics views.
func tableStats(ctx context.Context, db *pgx.Conn, t table) (TableStats, error) {
	ts := TableStats{Table: t.Name(), Mode: t.Mode()}
	keyIndex := t.id.Derived("pkey")
	if t.inline {
		keyIndex = t.id.Derived(ledger.InlineIndexSuffix)
	}
	err := db.QueryRow(ctx, ledger.TableStatsSQL, t.id.Quoted(), keyIndex).Scan(&ts.TableBytes, &ts.IndexBytes, &ts.KeyIndexBytes,
		&ts.LiveTuples, &ts.DeadTuples, &ts.LastAutovacuum, &ts.LastVacuum)
	if err != nil {
		return ts, fmt.Errorf("size %s: %w", t.Name(), err)
	}
	return ts, nil
}

func printStats(w io.Writer, st Stats) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tMODE\tMETHOD\tROWS\tIN PROGRESS\tEXPIRED")
	for _, m := range st.Methods {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", m.Table, m.Mode, m.Method, m.Rows, m.InProgress, m.Expired)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "TABLE\tTABLE SIZE\tINDEX SIZE\tKEY INDEX\tLIVE TUPLES\tDEAD TUPLES\tLAST AUTOVACUUM")
	for _, t := range st.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", t.Table, size(t.TableBytes), size(t.IndexBytes), size(t.KeyIndexBytes),
			t.LiveTuples, t.DeadTuples, stamp(t.LastAutovacuum))
	}
	return tw.Flush()
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f kB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST")
}
