package idem

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // pgx's database/sql driver, which NewSQLStore requires
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDriverChosenWithStore pins that a store's executor and driver are
// chosen once, by its constructor, and that only a store made by NewStore
// holds a pool. Neither constructor connects, so no server is needed.
func TestDriverChosenWithStore(t *testing.T) {
	const dsn = "postgres://idem@127.0.0.1:1/none"
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := NewStore(pool)
	require.NoError(t, err)
	assert.IsType(t, pgxExecutor{}, s.exec)
	assert.IsType(t, pgxDriver{}, s.drv)
	assert.Equal(t, Pool(pool), s.Pool())
	assert.Nil(t, s.DB())

	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ss, err := NewSQLStore(db)
	require.NoError(t, err)
	assert.IsType(t, sqlExecutor{}, ss.exec)
	assert.IsType(t, sqlDriver{}, ss.drv)
	assert.Nil(t, ss.Pool())
	assert.Same(t, db, ss.DB())
}
