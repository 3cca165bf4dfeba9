package faults

import "testing"

// txPath is how a scenario's service reaches PostgreSQL: through pgx
// (idem.NewStore over a *pgxpool.Pool; methods take a pgx.Tx), or through
// database/sql (idem.NewSQLStore over a *sql.DB opened with pgx's stdlib
// driver; methods take a *sql.Tx). The protocol is the same; the
// database/sql path sends its statements one at a time.
type txPath int

const (
	pgxPath txPath = iota
	sqlPath
)

// String names the path, as subtests and the figures table show it.
func (p txPath) String() string {
	if p == sqlPath {
		return "database_sql"
	}
	return "pgx"
}

// label is what a scenario's name gets on p: nothing on pgx (the figures
// table keeps its rows' names), " (database/sql)" on database/sql.
func (p txPath) label() string {
	if p == sqlPath {
		return " (database/sql)"
	}
	return ""
}

// onBothPaths runs scenario once per path, as subtests named after the path,
// with the same intentions and the same checks (e.check).
func onBothPaths(t *testing.T, scenario func(t *testing.T, p txPath)) {
	for _, p := range []txPath{pgxPath, sqlPath} {
		t.Run(p.String(), func(t *testing.T) { scenario(t, p) })
	}
}
