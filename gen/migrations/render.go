package migrations

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
)

// stmt is one group of SQL lines in a migration, with the comment lines a
// reviewer reads above it and the squawk rules it is exempt from.
type stmt struct {
	Why    []string
	Ignore string // squawk rules, comma-separated; "" for none
	SQL    string
}

// fileData is the data of the templates in package templates.
type fileData struct {
	Tool        string // display name of the migration tool
	Kind        string // create, alter, index, timeouts or reset
	Table       string // unquoted
	TableQuoted string
	Methods     []string
	Key         string
	Columns     []columnData
	Indexes     []indexData
	Storage     string
	SchemaNote  string
	OldTables   []string

	IndexName    string
	IndexQuoted  string
	IndexColumns string
	IndexComment string
	UniqueNote   string
	Companions   []string // helper migrations around a lone concurrent build
	Companions0  string   // the index migration, named from a helper

	Assumes string // inline mode: what the migration assumes about the business table

	Citus *citusData // create or distribute: the ledger is distributed on Citus

	LockAttempt string // longest wait of one lock attempt (lockStmt)
	LockBudget  string // how long the lock attempts go on in all

	Rollback string
	State    string
	NoTx     bool // the migration runs outside a transaction
}

type columnData struct{ Name, Comment string }

// citusData names the table the ledger is co-located with and its
// distribution column, and the setting that asked for it.
type citusData struct{ Colocate, Column, Setting string }

type indexData struct{ Name, Columns, Comment string }

// pgDuration renders d as a PostgreSQL time string such as '5s' or '1500ms'.
func pgDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("'%ds'", d/time.Second)
	}
	return fmt.Sprintf("'%dms'", d/time.Millisecond)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// render turns one step into files, numbered from version; it returns how
// many version numbers it used.
func (r *renderer) render(s step, version uint64, width int) (map[string][]byte, uint64, error) {
	switch s.kind {
	case "create":
		up, down := r.createStmts()
		files, err := r.files(r.createData(s), up, down, version, width, r.slug("create", r.ledger.Table.String()))
		return files, 1, err
	case "alter":
		up, down := r.alterStmts(s)
		files, err := r.files(r.alterData(s), up, down, version, width, r.slug("alter", r.ledger.Table.String()))
		return files, 1, err
	case "index":
		return r.renderIndex(s, version, width)
	case "distribute":
		up, down := r.distributeStmts()
		files, err := r.files(r.distributeData(), up, down, version, width, r.slug("distribute", r.ledger.Table.String()))
		return files, 1, err
	}
	return nil, 0, fmt.Errorf("migrations: unknown step %q", s.kind)
}

func (r *renderer) slug(verb, name string) string {
	return "idemgen_" + verb + "_" + strings.ReplaceAll(name, ".", "_")
}

// versionName is the name of a migration without its direction and
// extension: the version, zero-padded to width digits, and the slug.
func versionName(version uint64, width int, slug string) string {
	return fmt.Sprintf("%0*d_%s", width, version, slug)
}

// base fills the fields every file shares.
func (r *renderer) base(kind string) fileData {
	l := r.ledger
	methods := r.cfg.Methods
	if len(methods) == 0 {
		methods = []string{"(no method yet)"}
	}
	return fileData{
		Tool:        r.format.Tool,
		Kind:        kind,
		Table:       l.Table.String(),
		TableQuoted: l.Table.Quoted(),
		Methods:     methods,
		Key:         strings.Join(l.Key, ", "),
		Assumes:     r.assumes,
		LockAttempt: min(LockAttemptWait, r.cfg.LockTimeout).String(),
		LockBudget:  lockBudget(r.cfg.StatementTimeout).String(),
	}
}

func (r *renderer) setTimeouts(local bool, lock, statement string) stmt {
	kw := "SET "
	if local {
		kw = "SET LOCAL "
	}
	return stmt{
		Why: []string{"Give up rather than queue behind a long-running lock and block the traffic behind it."},
		SQL: kw + "lock_timeout = " + lock + ";\n" + kw + "statement_timeout = " + statement + ";",
	}
}

// txWrap adds BEGIN/COMMIT for formats whose files carry their own
// transaction, or the file-level squawk exemption where the tool runs the
// file in a transaction squawk cannot see.
func (r *renderer) txWrap(stmts []stmt, first bool) []stmt {
	if r.format.ToolTx {
		if !first {
			return stmts
		}
		head := stmt{
			Why: []string{r.base("").Tool + " runs this migration in one transaction: it applies whole or not at all, so a failed run can simply be run again. squawk cannot see that transaction."},
			SQL: "-- squawk-ignore-file prefer-robust-stmts",
		}
		return append([]stmt{head}, stmts...)
	}
	out := []stmt{{SQL: "BEGIN;"}}
	out = append(out, stmts...)
	return append(out, stmt{SQL: "COMMIT;"})
}

// ignoreInTx returns rule when squawk cannot see the migration's
// transaction (the tool opens it), "" when the file says BEGIN itself.
func (r *renderer) ignoreInTx(rule string) string {
	if r.format.ToolTx {
		return rule
	}
	return ""
}

func (r *renderer) createStmts() (up, down []stmt) {
	l := r.ledger
	lock, st := pgDuration(r.cfg.LockTimeout), pgDuration(r.cfg.StatementTimeout)
	up = append(up, r.setTimeouts(true, lock, st))
	up = append(up, stmt{SQL: l.CreateTableSQL()})
	up = append(up, stmt{Why: []string{"Column comments, for operators reading \\d+ in psql."}, SQL: l.CommentsSQL()})
	for _, ix := range l.Indexes {
		up = append(up, stmt{
			Why:    []string{capitalize(ix.Comment) + ". The table was created empty in this transaction: a plain build is instant and blocks no one."},
			Ignore: r.ignoreInTx("require-concurrent-index-creation"),
			SQL:    l.CreateIndexSQL(ix, false),
		})
	}
	if c := r.cfg.citus; c != nil {
		up = append(up, r.distributeStmt(*c))
	}
	down = append(down, r.setTimeouts(true, lock, st))
	down = append(down, stmt{
		Why:    []string{"A rollback drops what the up migration created: the table, its indexes and its rows."},
		Ignore: "ban-drop-table",
		SQL:    l.DropTableSQL(),
	})
	return r.txWrap(up, true), r.txWrap(down, false)
}

func (r *renderer) createData(s step) fileData {
	l := r.ledger
	d := r.base("create")
	for _, ix := range l.Indexes {
		d.Indexes = append(d.Indexes, indexData{Name: l.Table.Derived(ix.Suffix), Columns: strings.Join(ix.Columns, ", "), Comment: ix.Comment})
	}
	d.Storage = storageAssign(storageMap(l.Storage), "=")
	if l.Table.Schema != "" {
		d.SchemaNote = "The schema " + l.Table.Schema + " must exist before this migration runs; idemgen does not create schemas."
	}
	d.OldTables = s.oldTables
	cols := make([]string, len(l.Columns))
	for i, c := range l.Columns {
		cols[i] = c.Name
	}
	ixs := make([]string, len(l.Indexes))
	for i, ix := range l.Indexes {
		ixs[i] = ix.Suffix
	}
	d.State = fileState{format: r.cfg.Format, table: l.Table.String(), creates: true, key: l.Key,
		columns: cols, indexes: ixs, storage: storageMap(l.Storage), citus: r.cfg.Distributed}.String()
	d.Citus = r.citusData()
	d.Rollback = r.rollback("drops the table and every stored response in it: a retry of a request made before the rollback runs the method again.",
		l.DropTableSQL())
	return d
}

// distributeStmt makes the ledger a distributed table, last in its
// migration, once its indexes and comments exist (Citus copies them to
// every shard).
func (r *renderer) distributeStmt(c ledger.Citus) stmt {
	return stmt{
		Why: []string{fmt.Sprintf("Distribute the ledger by %s, the tenant, with its shards placed beside those of %s (distributed by %s): every ledger statement names one scope, so it routes to one shard, and a claim and the method's writes for one tenant stay on one node.",
			ledger.CitusColumn, c.Colocate, c.Column)},
		SQL: r.ledger.DistributeSQL(c),
	}
}

// distributeStmts distribute a ledger an earlier migration created.
// create_distributed_table copies the rows into the shards while it holds a
// lock that blocks writes: the ledger holds only the keys of its retention
// window, and the rollback turns it back into a local table.
func (r *renderer) distributeStmts() (up, down []stmt) {
	lock := pgDuration(r.cfg.LockTimeout)
	set := stmt{
		Why: []string{"Give up rather than queue behind a long-running lock. No statement_timeout: the copy into the shards takes as long as the rows it moves."},
		SQL: "SET LOCAL lock_timeout = " + lock + ";\nSET LOCAL statement_timeout = 0;",
	}
	dist := r.distributeStmt(*r.cfg.citus)
	dist.Why = append(dist.Why, "Skipped when the table is distributed already (by hand, with create_distributed_table_concurrently). The copied rows are then removed from the coordinator's local table, where Citus leaves them on disk, unseen.")
	dist.SQL = r.format.Block(r.ledger.DistributeIfLocalSQL(*r.cfg.citus))
	up = append(up, set, dist)
	down = append(down, set, stmt{
		Why: []string{"A rollback turns the ledger back into a local table on the coordinator, rows included."},
		SQL: r.ledger.UndistributeSQL(),
	})
	return r.txWrap(up, true), r.txWrap(down, false)
}

func (r *renderer) distributeData() fileData {
	d := r.base("distribute")
	d.Citus = r.citusData()
	d.State = fileState{format: r.cfg.Format, table: r.ledger.Table.String(), citus: r.cfg.Distributed}.String()
	d.Rollback = r.rollback("turns the ledger back into a local table on the coordinator.", r.ledger.UndistributeSQL())
	return d
}

// citusData is the header's account of the distribution, nil when none.
func (r *renderer) citusData() *citusData {
	c := r.cfg.citus
	if c == nil {
		return nil
	}
	return &citusData{Colocate: c.Colocate.String(), Column: c.Column, Setting: c.String()}
}

func (r *renderer) alterStmts(s step) (up, down []stmt) {
	l := r.ledger
	lock, st := pgDuration(r.cfg.LockTimeout), pgDuration(r.cfg.StatementTimeout)
	up = append(up, r.setTimeouts(true, lock, st), r.lockStmt(l.Table))
	down = append(down, r.setTimeouts(true, lock, st), r.lockStmt(l.Table))
	for _, c := range s.columns {
		up = append(up, stmt{Why: []string{capitalize(c.Comment) + "."}, SQL: l.AddColumnSQL(c)})
	}
	if s.storage != nil {
		up = append(up, stmt{Why: []string{"Vacuum early: every row is inserted, updated once and deleted."},
			SQL: l.SetStorageSQL(s.storage)})
		var reset []string
		prev := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(s.storage)) {
			if v, ok := s.prevStore[k]; ok {
				prev[k] = v
			} else {
				reset = append(reset, k)
			}
		}
		var sql []string
		if len(prev) > 0 {
			sql = append(sql, l.SetStorageSQL(prev))
		}
		if len(reset) > 0 {
			sql = append(sql, l.ResetStorageSQL(reset))
		}
		down = append(down, stmt{Why: []string{"Restore the previous autovacuum settings."}, SQL: strings.Join(sql, "\n")})
	}
	for i := len(s.columns) - 1; i >= 0; i-- {
		c := s.columns[i]
		down = append(down, stmt{
			Why:    []string{"A rollback drops the column the up migration added, with its data."},
			Ignore: "ban-drop-column",
			SQL:    l.DropColumnSQL(c),
		})
	}
	return r.txWrap(up, true), r.txWrap(down, false)
}

func (r *renderer) alterData(s step) fileData {
	d := r.base("alter")
	cols := make([]string, len(s.columns))
	for i, c := range s.columns {
		d.Columns = append(d.Columns, columnData{Name: c.Name, Comment: c.Comment})
		cols[i] = c.Name
	}
	if s.storage != nil {
		d.Storage = storageAssign(s.storage, "=")
	}
	d.State = fileState{format: r.cfg.Format, table: r.ledger.Table.String(), columns: cols, storage: s.storage}.String()
	what := "drops the added columns, with their data"
	if len(s.columns) == 0 {
		what = "restores the previous autovacuum settings"
	} else if s.storage != nil {
		what += ", and restores the previous autovacuum settings"
	}
	d.Rollback = r.rollback(what+".", "")
	return d
}

// files renders a migration with up and down statements into the format's
// file(s) at one version.
func (r *renderer) files(d fileData, up, down []stmt, version uint64, width int, slug string) (map[string][]byte, error) {
	name := versionName(version, width, slug)
	_, downName := r.format.FileNames(name)
	d.Rollback = strings.ReplaceAll(d.Rollback, "{down}", downName)
	m := migformat.Migration{NoTx: d.NoTx}
	var errs []error
	exec := func(tmpl string, data any) string {
		b, err := r.exec(tmpl, data)
		errs = append(errs, err)
		return string(b)
	}
	m.Header, m.Up, m.Down = exec("header", d), exec("stmts", up), exec("stmts", down)
	if downName != "" {
		d.State = ""
		m.DownHeader = exec("header", d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	files, err := r.format.Files(name, m)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return files, nil
}

// rollback says how to undo a migration with the format's tool; what says
// what the down migration does, manual is the SQL for a tool that plans
// rollbacks itself (atlas).
func (r *renderer) rollback(what, manual string) string {
	s := r.format.Rollback + what
	if r.format.Down == migformat.DownPlanned && manual != "" {
		s += " By hand: " + manual
	}
	return s
}

func (r *renderer) renderIndex(s step, version uint64, width int) (map[string][]byte, uint64, error) {
	l := r.ledger
	ix := s.index
	name := l.Table.Derived(ix.Suffix)
	qname := l.Table.QuotedDerived(ix.Suffix)
	lock := pgDuration(r.cfg.LockTimeout)
	d := r.base("index")
	d.IndexName = name
	d.IndexQuoted = qname
	d.IndexColumns = strings.Join(ix.Columns, ", ")
	d.IndexComment = ix.Comment
	if ix.Unique {
		d.UniqueNote = ", or rows that break uniqueness"
	}
	d.NoTx = true
	d.State = fileState{format: r.cfg.Format, table: l.Table.String(), indexes: []string{ix.Suffix}}.String()
	slug := r.slug("index", name)

	set := stmt{
		Why: []string{"Give up rather than queue behind a long-running lock. No statement_timeout: cancelling a concurrent build part-way only leaves an INVALID index behind."},
		SQL: "SET lock_timeout = " + lock + ";\nSET statement_timeout = 0;",
	}
	reset := stmt{SQL: "RESET lock_timeout;\nRESET statement_timeout;"}
	build := stmt{Why: []string{capitalize(ix.Comment) + "."}, SQL: l.CreateIndexSQL(ix, true)}
	drop := stmt{Why: []string{"A rollback drops the index without blocking writes."}, SQL: l.DropIndexSQL(ix, true)}
	check := stmt{Why: []string{"Stop here if the build failed and left an INVALID index (see the header)."}, SQL: r.validCheck(qname)}

	if !r.format.Lone {
		up := []stmt{set, build, check, reset}
		down := []stmt{set, drop, reset}
		d.Rollback = r.rollback("drops the index without blocking writes.", l.DropIndexSQL(ix, true))
		files, err := r.files(d, up, down, version, width, slug)
		return files, 1, err
	}

	// golang-migrate and dbmate run a no-transaction migration as one
	// statement: the session settings go in migrations of their own before
	// and after it, run on the same connection.
	setName := versionName(version, width, slug+"_timeouts")
	ixName := versionName(version+1, width, slug)
	resetName := versionName(version+2, width, slug+"_check")
	exempt := "require-lock-timeout, require-statement-timeout"
	build.Why = append(build.Why, "lock_timeout and statement_timeout are set by "+setName+", just before.")
	build.Ignore = exempt
	drop.Why = append(drop.Why, "lock_timeout and statement_timeout are set by the rollback of "+resetName+", just before.")
	drop.Ignore = exempt
	out := map[string][]byte{}
	add := func(files map[string][]byte, err error) error {
		if err != nil {
			return err
		}
		maps.Copy(out, files)
		return nil
	}
	steps := 3
	d.Companions = []string{setName, resetName}
	d.Rollback = r.lonelyRollback(ixName, setName, resetName)
	if err := add(r.files(d, []stmt{build}, []stmt{drop}, version+1, width, slug)); err != nil {
		return nil, 0, err
	}

	ds := r.base("timeouts")
	ds.IndexName, ds.IndexQuoted, ds.Companions0 = name, qname, ixName
	ds.State = fileState{format: r.cfg.Format, table: l.Table.String()}.String()
	ds.Rollback = r.rollback("resets the settings.", "")
	if err := add(r.files(ds, []stmt{set}, []stmt{reset}, version, width, slug+"_timeouts")); err != nil {
		return nil, 0, err
	}

	dr := r.base("reset")
	dr.IndexName, dr.IndexQuoted, dr.Companions0 = name, qname, ixName
	dr.State = ds.State
	dr.Rollback = r.rollback("sets the timeouts again for the rollback of "+ixName+".", "")
	if err := add(r.files(dr, []stmt{check, reset}, []stmt{set}, version+2, width, slug+"_check")); err != nil {
		return nil, 0, err
	}
	return out, uint64(steps), nil
}

// lonelyRollback says how to roll back a concurrent build split over three
// migrations.
func (r *renderer) lonelyRollback(ixName, setName, resetName string) string {
	return fmt.Sprintf("%s rolls back %s (which sets the timeouts again), %s (which drops the index without blocking writes) and %s (which resets the timeouts), in that order.",
		r.format.RollbackThree, resetName, ixName, setName)
}

// validCheck fails when the index exists but is INVALID.
func (r *renderer) validCheck(qname string) string {
	msg := quoteLiteral("index % is INVALID after a failed concurrent build: drop it with DROP INDEX CONCURRENTLY and run this migration again")
	return r.format.Block(fmt.Sprintf(`DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_index WHERE indexrelid = to_regclass(%s) AND NOT indisvalid) THEN
        RAISE EXCEPTION %s, %s;
    END IF;
END
$$;`, quoteLiteral(qname), msg, quoteLiteral(qname)))
}

func storageAssign(m map[string]string, eq string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+eq+m[k])
	}
	return strings.Join(parts, ", ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
