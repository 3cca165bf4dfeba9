package idemtest

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMigrationsOnExternalServer runs the migration tests in a child test
// binary pointed at this binary's server through EnvDatabaseURL: they pass
// without templates (the migrations are applied to each database) and leave
// no database behind.
func TestMigrationsOnExternalServer(t *testing.T) {
	srv, err := getServer()
	require.NoError(t, err)
	cfg := srv.admin.Config().ConnConfig
	url := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	count := func(pattern string) int {
		var n int
		require.NoError(t, srv.admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname LIKE $1", pattern).Scan(&n))
		return n
	}
	testsBefore, templatesBefore := count(`idemtest\_%`), count(`idemtest\_template\_%`)

	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v",
		"-test.run=^(TestMigrationsApplyGoldens|TestMigrationsApplyUserFilesInOrder|TestMigrationsCheckMissingFile|TestMigrationsAppliedOncePerSet)$/^(goose|dbmate)$/^inline$")
	cmd.Env = append(os.Environ(), EnvDatabaseURL+"="+url)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, name := range []string{"TestMigrationsApplyGoldens/goose/inline", "TestMigrationsApplyGoldens/dbmate/inline", "TestMigrationsApplyUserFilesInOrder", "TestMigrationsCheckMissingFile", "TestMigrationsAppliedOncePerSet"} {
		assert.Contains(t, string(out), "--- PASS: "+name)
	}
	assert.Equal(t, testsBefore, count(`idemtest\_%`), "the child left databases behind")
	assert.Equal(t, templatesBefore, count(`idemtest\_template\_%`), "the child made templates on an external server")
}

// TestNewDBWithBrokenMigrations checks that New's database fails, naming
// the file, when a generated migration is missing, and that nothing is left
// behind.
func TestNewDBWithBrokenMigrations(t *testing.T) {
	srv, err := getServer()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00001_user.sql"), []byte("-- +goose Up\nSELECT 1;\n"), 0o644))
	m := Migrations{Dir: dir, Format: "goose", Generated: []GeneratedFile{{Name: "00002_idemgen_create_idempotency_keys.sql", SHA256: "00"}}}
	var before int
	require.NoError(t, srv.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname LIKE 'idemtest\_%'`).Scan(&before))

	o := options{}
	WithMigrations(m)(&o)
	assert.True(t, o.noLedger, "WithMigrations implies WithoutLedger")
	_, err = srv.newDB(t.Context(), t.Name(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.ToSlash(filepath.Join(dir, "00002_idemgen_create_idempotency_keys.sql"))+" is missing")

	var after int
	require.NoError(t, srv.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname LIKE 'idemtest\_%'`).Scan(&after))
	assert.Equal(t, before, after)
}

// TestImportsStayLight keeps the imports of the package and of its launcher
// (pgserver) to the standard library, pgx and this module's runtime:
// generated tests import the package, so anything more (a migration tool,
// say) would enter every user's go.mod.
func TestImportsStayLight(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	launcher, err := filepath.Glob(filepath.Join("pgserver", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, launcher)
	files = append(files, launcher...)
	allowed := []string{"github.com/jackc/pgx/v5", "github.com/idemgen/idemgen/runtime/idem", "github.com/idemgen/idemgen/runtime/idemtest/pgserver"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			first, _, _ := strings.Cut(path, "/")
			ok := !strings.Contains(first, ".") || slices.ContainsFunc(allowed, func(a string) bool { return path == a || strings.HasPrefix(path, a+"/") })
			assert.True(t, ok, "%s imports %s", name, path)
		}
	}
}
