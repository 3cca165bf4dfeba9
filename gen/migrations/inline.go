package migrations

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
)

// InlineTable is a business table that inline-mode methods keep their keys
// in: Plan adds the key, scope, fingerprint and claimed-at columns to it and
// builds the partial unique index on (scope, key) concurrently. The table
// itself is the user's: idemgen never creates, rewrites or drops it.
type InlineTable struct {
	Table   string   // possibly schema-qualified
	Methods []string // the inline methods writing their keys into it
}

// inlinePlan renders the migrations the inline tables still need, numbered
// from next: one transactional migration adding the missing columns, then
// the concurrent index build alone in the tool's no-transaction form.
func (r *renderer) inlinePlan(tables []InlineTable, st dirState, existing map[string][]byte, next uint64, width int) (map[string][]byte, uint64, error) {
	tables = slices.Clone(tables)
	sort.Slice(tables, func(i, j int) bool { return tables[i].Table < tables[j].Table })
	out := map[string][]byte{}
	var used uint64
	for _, it := range tables {
		s, err := ledger.NewInline(it.Table)
		if err != nil {
			return nil, 0, fmt.Errorf("migrations: inline table: %w", err)
		}
		name := s.Table.String()
		if name == r.ledger.Table.String() {
			return nil, 0, fmt.Errorf("migrations: inline table %s is the ledger table: name the business table whose rows carry the key", name)
		}
		methods := slices.Sorted(slices.Values(it.Methods))
		cfg := r.cfg
		cfg.Methods = methods
		ri := &renderer{cfg: cfg, format: r.format, ledger: ledger.Schema{Table: s.Table, Indexes: []ledger.Index{s.Index()}}, tmpl: r.tmpl,
			assumes: inlineAssumes(s.Table, existing)}

		have := st.tables[name]
		var add []ledger.Column
		for _, c := range s.Columns {
			if have == nil || !have.columns[c.Name] {
				add = append(add, c)
			}
		}
		if len(add) > 0 {
			up, down := ri.inlineColumnsStmts(s, add)
			d := ri.base("inline-columns")
			cols := make([]string, len(add))
			for i, c := range add {
				d.Columns = append(d.Columns, columnData{Name: c.Name, Comment: c.Comment})
				cols[i] = c.Name
			}
			d.State = fileState{format: cfg.Format, table: name, columns: cols}.String()
			d.Rollback = ri.rollback("drops the added columns, with the keys in them; the table and its rows stay.", "")
			files, err := ri.files(d, up, down, next+used, width, ri.slug("inline", name))
			if err != nil {
				return nil, 0, err
			}
			maps.Copy(out, files)
			used++
		}
		if have == nil || !have.indexes[ledger.InlineIndexSuffix] {
			files, n, err := ri.renderIndex(step{kind: "index", index: s.Index()}, next+used, width)
			if err != nil {
				return nil, 0, err
			}
			maps.Copy(out, files)
			used += n
		}
	}
	return out, used, nil
}

// inlineColumnsStmts adds the columns, each nullable and without a default
// (a catalog change, no rewrite), then sets the defaults, which apply to new
// rows only.
func (r *renderer) inlineColumnsStmts(s ledger.Inline, add []ledger.Column) (up, down []stmt) {
	lock, st := pgDuration(r.cfg.LockTimeout), pgDuration(r.cfg.StatementTimeout)
	up = append(up, r.setTimeouts(true, lock, st), r.lockStmt(s.Table))
	down = append(down, r.setTimeouts(true, lock, st), r.lockStmt(s.Table))
	for _, c := range add {
		up = append(up, stmt{Why: []string{capitalize(c.Comment) + "."}, SQL: s.AddColumnSQL(c)})
	}
	for _, c := range add {
		if c.Default != "" {
			up = append(up, stmt{
				Why: []string{"The default stamps rows written from now on; existing rows keep NULL, so nothing is rewritten."},
				SQL: s.SetDefaultSQL(c),
			})
		}
	}
	for i := len(add) - 1; i >= 0; i-- {
		c := add[i]
		down = append(down, stmt{
			Why:    []string{"A rollback drops the column the up migration added, with its data."},
			Ignore: "ban-drop-column",
			SQL:    s.DropColumnSQL(c),
		})
	}
	return r.txWrap(up, true), r.txWrap(down, false)
}

// inlineAssumes says what the inline migrations assume about the business
// table: which of the user's migrations creates it, or that none here does.
func inlineAssumes(table ledger.Ident, existing map[string][]byte) string {
	name := regexp.QuoteMeta(table.Name)
	schema := `(?:"?public"?\s*\.\s*)?`
	if table.Schema != "" {
		schema = `"?` + regexp.QuoteMeta(table.Schema) + `"?\s*\.\s*`
	}
	re := regexp.MustCompile(`(?is)\bcreate\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?` + schema + `"?` + name + `"?\s*\(`)
	var creators []string
	for _, n := range slices.Sorted(maps.Keys(existing)) {
		if isOwned(existing[n]) || strings.HasSuffix(n, migformat.DownSuffix) {
			continue
		}
		if re.Match(existing[n]) {
			creators = append(creators, n)
		}
	}
	if len(creators) > 0 {
		return fmt.Sprintf("Assumes the table %s exists, as created by %s, which this migration runs after; it only adds to the table and never creates, rewrites or drops it.", table, strings.Join(creators, ", "))
	}
	return fmt.Sprintf("Assumes the table %s already exists: no migration in this directory creates it, so it must come from elsewhere (another migrations directory, or by hand) before this runs. idemgen only adds to the table; it never creates, rewrites or drops it.", table)
}
