package idemtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

func TestMain(m *testing.M) { Main(m) }

func TestFindBinariesMissingSaysHowToGetOne(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install postgresql-15")
	assert.Contains(t, err.Error(), EnvDatabaseURL)
}

func TestStartupFailureShowsServerLog(t *testing.T) {
	bin, err := findBinaries(pgserver.DebianBinaries)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	_, err = startLocal(ctx, bin, []string{"shared_buffers=plenty"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "postgres exited during start-up")
	assert.Contains(t, err.Error(), "--- postgres log")
	assert.Contains(t, err.Error(), `invalid value for parameter "shared_buffers"`)
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:p%40ss@db.internal:5433/postgres?sslmode=require", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "postgres://u:p%40ss@db.internal:5433/idemtest_x?sslmode=require", got)

	got, err = withDatabase("postgres://postgres@/postgres?host=%2Ftmp%2Fs", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "postgres://postgres@/idemtest_x?host=%2Ftmp%2Fs", got)

	got, err = withDatabase("host=/tmp/s user=postgres dbname=postgres", "idemtest_x")
	require.NoError(t, err)
	assert.Equal(t, "host=/tmp/s user=postgres dbname=postgres dbname=idemtest_x", got)
}

func TestDatabaseName(t *testing.T) {
	a, err := databaseName("TestCharge/Twins:_same key (retry)#01")
	require.NoError(t, err)
	b, err := databaseName("TestCharge/Twins:_same key (retry)#01")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^idemtest_testcharge_twins_same_key_retry_01_[0-9a-f]{12}$`, a)

	long, err := databaseName(strings.Repeat("TestVeryLongName", 10))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(long), 63)
}

// TestExternalServerURL runs a few of this package's tests in a child test
// binary pointed at this binary's server through EnvDatabaseURL, given in
// keyword/value form, and checks the child makes no templates and leaves no
// database behind.
func TestExternalServerURL(t *testing.T) {
	srv, err := getServer()
	require.NoError(t, err)
	cfg := srv.admin.Config().ConnConfig
	url := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)

	countDBs := func() (tests, templates int) {
		require.NoError(t, srv.admin.QueryRow(t.Context(), `
			SELECT count(*) FILTER (WHERE datname NOT LIKE 'idemtest\_template\_%'),
			       count(*) FILTER (WHERE datname LIKE 'idemtest\_template\_%')
			FROM pg_database WHERE datname LIKE 'idemtest\_%'`).Scan(&tests, &templates))
		return tests, templates
	}
	testsBefore, templatesBefore := countDBs()

	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v",
		"-test.run=^(TestNewGivesWorkingPoolWithLedger|TestDatabaseIsDroppedAtCleanup|TestWithTableSchemaQualified)$")
	cmd.Env = append(os.Environ(), EnvDatabaseURL+"="+url)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestNewGivesWorkingPoolWithLedger")
	assert.Contains(t, string(out), "--- PASS: TestDatabaseIsDroppedAtCleanup")

	testsAfter, templatesAfter := countDBs()
	assert.Equal(t, testsBefore, testsAfter, "the child left test databases behind")
	assert.Equal(t, templatesBefore, templatesAfter, "the child made templates on an external server")

	// In-process: the URL yields a server this package did not start.
	t.Setenv(EnvDatabaseURL, url)
	ext, err := startServer(t.Context())
	require.NoError(t, err)
	assert.Nil(t, ext.pg, "a server was started although %s is set", EnvDatabaseURL)
	assert.Nil(t, ext.templates)
	require.NoError(t, ext.stop())
}

func TestExternalServerUnreachable(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "host="+t.TempDir()+" user=postgres dbname=postgres connect_timeout=5")
	_, err := startServer(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), EnvDatabaseURL)
}
