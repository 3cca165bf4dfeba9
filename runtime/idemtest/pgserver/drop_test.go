package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDropDatabaseRetries holds a database with what WITH (FORCE) cannot
// end, a prepared transaction: DropDatabase keeps trying, names it when its
// context ends, and drops the database once it is rolled back.
func TestDropDatabaseRetries(t *testing.T) {
	s, err := Start(t.Context(), Config{Settings: []string{"max_prepared_transactions=2"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Exec(t.Context(), "CREATE DATABASE app"))
	require.NoError(t, s.execIn(t.Context(), "app", "CREATE TABLE t (id int)",
		"BEGIN", "INSERT INTO t VALUES (1)", "PREPARE TRANSACTION 'held'"))

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = s.DropDatabase(ctx, "app")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "55006")
	assert.Contains(t, err.Error(), "prepared transaction held", "the error names what held the database")

	conn, err := pgx.Connect(t.Context(), s.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(t.Context())
	done := make(chan error, 1)
	go func() { done <- DropDatabase(t.Context(), conn, "app") }()
	require.NoError(t, s.execIn(t.Context(), "app", "ROLLBACK PREPARED 'held'"))
	require.NoError(t, <-done)
	var n int
	require.NoError(t, s.queryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = 'app'", &n))
	assert.Zero(t, n, "the database is gone")
}
