package idemtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestStartWithSettings starts a server of its own with pg_stat_statements
// preloaded, as a benchmark command does to see where its time goes.
func TestStartWithSettings(t *testing.T) {
	if os.Getenv(idemtest.EnvDatabaseURL) != "" {
		t.Setenv(idemtest.EnvDatabaseURL, "")
	}
	srv, err := idemtest.Start(t.Context(), idemtest.WithSettings("shared_preload_libraries=pg_stat_statements"))
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Stop()) }()

	db, err := srv.NewDB(t.Context(), "standalone", idemtest.WithSetup(`CREATE TABLE work (id bigint)`))
	require.NoError(t, err)
	assert.Regexp(t, `^idemtest_standalone_[0-9a-f]{12}$`, db.Name)
	assert.Equal(t, []string{"scope", "method", "key"}, primaryKey(t, db.Pool, idem.DefaultTable))

	var preload string
	require.NoError(t, db.Pool.QueryRow(t.Context(), "SHOW shared_preload_libraries").Scan(&preload))
	assert.Equal(t, "pg_stat_statements", preload)
	_, err = db.Pool.Exec(t.Context(), "CREATE EXTENSION pg_stat_statements")
	require.NoError(t, err)
	_, err = db.Pool.Exec(t.Context(), "INSERT INTO work VALUES (1)")
	require.NoError(t, err)
	var calls int64
	require.NoError(t, db.Pool.QueryRow(t.Context(),
		`SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'INSERT INTO work%'`).Scan(&calls))
	assert.Equal(t, int64(1), calls)

	// Close drops the database; a second database on the server sees it gone.
	observer, err := srv.NewDB(t.Context(), "observer", idemtest.WithoutLedger())
	require.NoError(t, err)
	defer func() { require.NoError(t, observer.Close()) }()
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "closing twice is harmless")
	var exists bool
	require.NoError(t, observer.Pool.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", db.Name).Scan(&exists))
	assert.False(t, exists, "database %s survived Close", db.Name)
}

// TestStartDefaultSettings: without WithSettings the server is the one New
// gives tests, with nothing preloaded.
func TestStartDefaultSettings(t *testing.T) {
	if os.Getenv(idemtest.EnvDatabaseURL) != "" {
		t.Setenv(idemtest.EnvDatabaseURL, "")
	}
	srv, err := idemtest.Start(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Stop()) }()
	db, err := srv.NewDB(t.Context(), "plain", idemtest.WithoutLedger())
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	var preload, fsync string
	require.NoError(t, db.Pool.QueryRow(context.Background(), "SELECT current_setting('shared_preload_libraries'), current_setting('fsync')").Scan(&preload, &fsync))
	assert.Empty(t, preload)
	assert.Equal(t, "off", fsync)
}

func TestStartRefusesSettingsForExternalServer(t *testing.T) {
	t.Setenv(idemtest.EnvDatabaseURL, "host=/nonexistent user=postgres dbname=postgres")
	_, err := idemtest.Start(t.Context(), idemtest.WithSettings("shared_preload_libraries=pg_stat_statements"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), idemtest.EnvDatabaseURL)
	assert.Contains(t, err.Error(), "shared_preload_libraries=pg_stat_statements")
}

func TestStartRefusesMalformedSetting(t *testing.T) {
	_, err := idemtest.Start(t.Context(), idemtest.WithSettings("fsync"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"fsync" is not name=value`)
}

// TestOpenOnTheSharedServer: Open gives a fresh database with the ledger on
// the server New uses, and Close drops it.
func TestOpenOnTheSharedServer(t *testing.T) {
	db, err := idemtest.Open(t.Context(), "open")
	require.NoError(t, err)
	var ledger, name string
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT to_regclass('idempotency_keys')::text, current_database()`).Scan(&ledger, &name))
	assert.Equal(t, "idempotency_keys", ledger)
	other := idemtest.New(t, idemtest.WithoutLedger())
	var exists bool
	require.NoError(t, other.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	assert.True(t, exists, "Open's database is on New's server")
	require.NoError(t, db.Close())
	require.NoError(t, other.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	assert.False(t, exists, "Close dropped it")
}
