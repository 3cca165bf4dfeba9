package idemtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger/migformat"
)

// Migrations is a package's migration directory in one tool's format.
type Migrations struct {
	Dir       string          // relative to the test's working directory (the package directory), e.g. "migrations"
	Format    string          // goose, golang-migrate, tern, dbmate, atlas or plain
	Generated []GeneratedFile // files idemgen wrote, in order: each must exist, unchanged, in this order among the files
}

// GeneratedFile is one migration file idemgen wrote and the SHA-256 of its
// bytes (lower-case hex).
type GeneratedFile struct{ Name, SHA256 string }

// WithMigrations makes New apply m to the fresh database instead of creating
// the default ledger (it implies WithoutLedger). New first checks m (see
// [Migrations.Check]) and fails the test naming the file that is missing,
// edited or out of order. The migrations are applied once per distinct set
// of files into a template database that every later database is copied
// from; on the server EnvDatabaseURL names, they are applied to each
// database.
func WithMigrations(m Migrations) Option {
	return func(o *options) {
		o.migrations = &m
		o.noLedger = true
	}
}

// Check verifies m.Generated against the directory without a database: each
// generated file exists, unchanged (same SHA-256), and the files sort, by
// version, in the order idemgen wrote them. It also checks that every
// migration file of the format has a version and that no two up migrations
// share one. The error names each file at fault and says what to do.
func (m Migrations) Check() error {
	_, err := m.load()
	return err
}

// Apply checks m (see [Migrations.Check]), then applies the up migrations of
// m.Dir to the database at conn in version order, the user's own files
// included, as m.Format's tool would: down migrations and down sections are
// skipped; a file that runs in a transaction runs in one, a file marked to
// run without one (CREATE INDEX CONCURRENTLY) runs statement by statement.
// All files run on conn, so session settings carry from one file to the
// next, as with the tools. An error names the file, the statement's number
// and line, and quotes the statement.
//
// Apply keeps no record of what it applied (no goose_db_version or
// schema_migrations table): the database is for tests, not for the tool to
// migrate further. Files the tests cannot read the tool's way are errors
// that say so: goose's ENVSUB, tern's {{ }} templates, atlas's delimiter
// directive. Go migrations (goose's .go files) are not SQL and are not run.
func (m Migrations) Apply(ctx context.Context, conn *pgx.Conn) error {
	set, err := m.load()
	if err != nil {
		return err
	}
	if err := set.apply(ctx, conn); err != nil {
		return fmt.Errorf("idemtest: %w", err)
	}
	return nil
}

// migrationFile is one up migration of a directory.
type migrationFile struct {
	name    string
	version string // the leading digits, without leading zeros
	data    []byte
}

// migrationSet is a directory's up migrations in version order, read and
// checked.
type migrationSet struct {
	m      Migrations
	format migformat.Format
	files  []migrationFile
	key    string // identifies the set: format, directory and every file's name and bytes
}

// versionPrefix matches the version at the start of a migration's name.
var versionPrefix = regexp.MustCompile(`^([0-9]+)`)

// load reads m.Dir, keeps the format's up migrations in version order and
// checks m.Generated against the directory.
func (m Migrations) load() (*migrationSet, error) {
	format, err := migformat.Lookup(m.Format)
	if err != nil {
		return nil, fmt.Errorf("idemtest: %w", err)
	}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, fmt.Errorf("idemtest: read migrations: %w", err)
	}
	set := &migrationSet{m: m, format: format}
	var errs []error
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
		f, ok, err := m.migrationFile(format, e)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			set.files = append(set.files, f)
		}
	}
	slices.SortStableFunc(set.files, func(a, b migrationFile) int { return compareVersions(a, b) })
	errs = append(errs, m.checkVersions(format, set.files)...)
	errs = append(errs, m.checkGenerated(names)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := sha256.New()
	dir, err := filepath.Abs(m.Dir)
	if err != nil {
		dir = m.Dir
	}
	fmt.Fprintf(h, "%s\x00%s\x00", m.Format, dir)
	for _, f := range set.files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.name, len(f.data))
		h.Write(f.data)
	}
	set.key = hex.EncodeToString(h.Sum(nil))
	return set, nil
}

// migrationFile reads e if it is an up migration in format. Other files
// (atlas.sum, down migrations, Go files, directories) are not migrations to
// apply; an .sql file without a version is an error.
func (m Migrations) migrationFile(format migformat.Format, e os.DirEntry) (migrationFile, bool, error) {
	name := e.Name()
	suffix := format.UpSuffix()
	if e.IsDir() || !strings.HasSuffix(name, ".sql") {
		return migrationFile{}, false, nil
	}
	v := versionPrefix.FindString(name)
	if v == "" {
		return migrationFile{}, false, fmt.Errorf("idemtest: %s: a migration's name starts with its version number; %s would reject or skip this file: rename it or move it out of %s", m.path(name), m.Format, m.Dir)
	}
	if !strings.HasSuffix(name, suffix) {
		if strings.HasSuffix(name, migformat.DownSuffix) {
			return migrationFile{}, false, nil
		}
		return migrationFile{}, false, fmt.Errorf("idemtest: %s: a %s migration's name ends with %s or %s", m.path(name), m.Format, suffix, migformat.DownSuffix)
	}
	data, err := os.ReadFile(filepath.Join(m.Dir, name))
	if err != nil {
		return migrationFile{}, false, fmt.Errorf("idemtest: read migration: %w", err)
	}
	return migrationFile{name: name, version: strings.TrimLeft(v, "0"), data: data}, true, nil
}

// compareVersions orders migrations by version number, then by name.
func compareVersions(a, b migrationFile) int {
	if c := len(a.version) - len(b.version); c != 0 {
		return c
	}
	if c := strings.Compare(a.version, b.version); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// checkVersions reports up migrations that share a version and, for a
// format that numbers migrations 1, 2, 3, ... (tern), a gap in the numbers.
func (m Migrations) checkVersions(format migformat.Format, files []migrationFile) []error {
	var errs []error
	for i := 1; i < len(files); i++ {
		if files[i].version == files[i-1].version {
			errs = append(errs, fmt.Errorf("idemtest: %s and %s have the same version: renumber the one that was never applied (a migration of your own)", m.path(files[i-1].name), m.path(files[i].name)))
		}
	}
	if format.Consecutive && len(errs) == 0 {
		for i, f := range files {
			if want := fmt.Sprint(i + 1); f.version != want {
				errs = append(errs, fmt.Errorf("idemtest: %s: %s numbers migrations 1, 2, 3, ... without gaps, and this one should be %s", m.path(f.name), format.Tool, want))
				break
			}
		}
	}
	return errs
}

// path is a migration's path relative to the package directory.
func (m Migrations) path(name string) string { return filepath.ToSlash(filepath.Join(m.Dir, name)) }

// Advice in the errors about generated migrations.
const (
	neverRewritten = "idemgen never rewrites or renumbers a migration, which may have been applied"
	editAdvice     = "run idemgen -check to see the difference; restore the file from version control and put the change in a new migration of your own"
)

// checkGenerated reports generated files that are missing from the
// directory (names holds every name in it), edited, or out of order.
func (m Migrations) checkGenerated(names map[string]bool) []error {
	var errs []error
	sums := map[string]string{} // SHA-256 -> name, of every file, to find a renamed one
	for name := range names {
		if b, err := os.ReadFile(filepath.Join(m.Dir, name)); err == nil {
			sums[sha256Hex(b)] = name
		}
	}
	var prev *migrationFile
	for _, g := range m.Generated {
		if g.Name == "" || g.Name != filepath.Base(g.Name) {
			errs = append(errs, fmt.Errorf("idemtest: generated migration %q: the name must be a file name in %s", g.Name, m.Dir))
			continue
		}
		if !names[g.Name] {
			if other, ok := sums[strings.ToLower(g.SHA256)]; ok {
				errs = append(errs, fmt.Errorf("idemtest: generated migration %s was renamed to %s: rename it back; %s", m.path(g.Name), m.path(other), neverRewritten))
			} else {
				errs = append(errs, fmt.Errorf("idemtest: generated migration %s is missing: restore it from version control; %s", m.path(g.Name), neverRewritten))
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.Dir, g.Name))
		if err != nil {
			errs = append(errs, fmt.Errorf("idemtest: read generated migration: %w", err))
			continue
		}
		if got := sha256Hex(b); got != strings.ToLower(g.SHA256) {
			errs = append(errs, fmt.Errorf("idemtest: generated migration %s was edited by hand (its SHA-256 is %s, idemgen wrote %s): %s", m.path(g.Name), got, g.SHA256, editAdvice))
		}
		cur := migrationFile{name: g.Name, version: strings.TrimLeft(versionPrefix.FindString(g.Name), "0")}
		if prev != nil && compareVersions(migrationFile{version: cur.version}, migrationFile{version: prev.version}) < 0 {
			errs = append(errs, fmt.Errorf("idemtest: generated migration %s sorts before %s, but idemgen wrote it to run after: the migrations would apply out of order; restore both from version control (%s)", m.path(g.Name), m.path(prev.name), neverRewritten))
		}
		prev = &cur
	}
	return errs
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// apply runs the set's up migrations on conn, in order.
func (s *migrationSet) apply(ctx context.Context, conn *pgx.Conn) error {
	for _, f := range s.files {
		up, err := s.format.Up(string(f.data))
		if err != nil {
			return fmt.Errorf("%s: %w", s.m.path(f.name), err)
		}
		if err := runScript(ctx, conn, up); err != nil {
			return fmt.Errorf("apply %s: %w%s", s.m.path(f.name), err, missingTableHint(f.data, err))
		}
	}
	return nil
}

// missingTableHint explains a generated migration that fails on a table no
// earlier migration creates: the tests apply migrations/ before any fixture
// runs, so a table the fixture used to create must get a migration of its own.
func missingTableHint(src []byte, err error) string {
	var pgErr *pgconn.PgError
	if !bytes.HasPrefix(src, []byte("-- Code generated by idemgen.")) || !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		return ""
	}
	return "\n(the generated tests apply the package's migrations before any fixture runs: create the table in a migration " +
		"of your own in the same directory, numbered before this one, instead of in a fixture)"
}

// runScript runs one file's up statements on conn, in one transaction or
// one by one. After a failure, the file's transaction, or one the file opened
// itself, is rolled back, so conn is usable again.
func runScript(ctx context.Context, conn *pgx.Conn, up migformat.Script) error {
	if up.InTx && len(up.Statements) > 0 {
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	err := execStatements(ctx, conn, up.Statements)
	if err == nil && up.InTx && len(up.Statements) > 0 {
		if _, err = conn.Exec(ctx, "COMMIT"); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if err != nil && conn.PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

// execStatements runs stmts one by one, each as a simple-protocol query.
func execStatements(ctx context.Context, conn *pgx.Conn, stmts []migformat.Statement) error {
	for i, st := range stmts {
		if _, err := conn.Exec(ctx, st.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("statement %d (line %d): %w\n%s", i+1, st.Line, err, quoteStatement(st.SQL))
		}
	}
	return nil
}

// quoteStatement indents a statement for an error message, cut after a few
// lines.
func quoteStatement(sql string) string {
	lines := strings.Split(sql, "\n")
	if len(lines) > 12 {
		lines = append(lines[:12], "...")
	}
	return "    " + strings.Join(lines, "\n    ")
}

// migrationTemplate returns the template database holding set applied, or
// "template0" when the server keeps no templates (EnvDatabaseURL's server:
// templates there would outlive the tests).
func (s *server) migrationTemplate(ctx context.Context, set *migrationSet) (string, error) {
	name, err := s.templateDB(ctx, "migrations:"+set.key, set.apply)
	if err != nil {
		return "", fmt.Errorf("idemtest: %w", err)
	}
	if name == "" {
		return "template0", nil
	}
	return name, nil
}

// applyURL applies set on a new connection to the database at url.
func applyURL(ctx context.Context, url string, set *migrationSet) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("idemtest: connect to apply migrations: %w", err)
	}
	if err = set.apply(ctx, conn); err != nil {
		err = fmt.Errorf("idemtest: %w", err)
	}
	if cerr := conn.Close(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("idemtest: close connection: %w", cerr)
	}
	return err
}
