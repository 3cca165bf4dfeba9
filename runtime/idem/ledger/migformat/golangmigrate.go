package migformat

import "strings"

// golangMigrate: an up and a down file per migration, each sent to the
// server as one query, which runs as one implicit transaction unless the
// file says BEGIN and COMMIT itself; a file of one statement runs alone.
func golangMigrate() Format {
	return Format{
		Name: "golang-migrate", Tool: "golang-migrate", Width: 6, Down: DownFile, Lone: true,
		Rollback:      "migrate down 1 runs {down}, which ",
		RollbackThree: "migrate down 3",
		up:            parseGolangMigrate,
	}
}

// plain: an up and a down file per migration, run by psql, statement by
// statement; the files say BEGIN and COMMIT themselves.
func plain() Format {
	return Format{
		Name: "plain", Tool: "psql", Width: 5, Down: DownFile,
		Rollback: "run {down} (psql -v ON_ERROR_STOP=1 -f), which ",
		up: func(src string) (Script, error) {
			stmts, err := split(src, 1)
			return Script{Statements: stmts}, err
		},
	}
}

// parseGolangMigrate reads a golang-migrate up file. golang-migrate sends
// the file as one query, which PostgreSQL runs as one implicit transaction
// unless the file says BEGIN and COMMIT itself; a file of one statement runs
// alone (CREATE INDEX CONCURRENTLY, say).
func parseGolangMigrate(src string) (Script, error) {
	stmts, err := split(src, 1)
	if err != nil {
		return Script{}, err
	}
	return Script{Statements: stmts, InTx: len(stmts) > 1 && !hasTxControl(stmts)}, nil
}

// hasTxControl reports whether a statement opens or ends a transaction.
func hasTxControl(stmts []Statement) bool {
	for _, s := range stmts {
		f := strings.Fields(strings.ToUpper(strings.TrimSuffix(s.SQL, ";")))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT":
			return true
		}
	}
	return false
}
