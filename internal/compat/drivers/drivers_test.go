// Package drivers_test checks which database/sql drivers idem.NewSQLStore
// accepts, with the drivers themselves. It lives in this module so that
// lib/pq stays out of the requirements of github.com/idemgen/idemgen.
package drivers_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "github.com/lib/pq"              // the "postgres" driver, refused
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestLibPQRefusedAndTheSameDSNWorksWithPgx: lib/pq's *sql.DB is refused
// before any connection is made, with the reason and what to write
// instead; what it says to write works with the same DSN.
func TestLibPQRefusedAndTheSameDSNWorksWithPgx(t *testing.T) {
	db := idemtest.New(t, idemtest.WithSetup(`CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`))
	pq, err := sql.Open("postgres", db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pq.Close() })
	_, err = idem.NewSQLStore(pq)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the driver *pq.Driver")
	assert.Contains(t, err.Error(), "*pgconn.PgError")
	assert.Contains(t, err.Error(), `the same DSN works with sql.Open("pgx", dsn)`)
	assert.NotContains(t, err.Error(), "\n")

	px, err := sql.Open("pgx", db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	s, err := idem.NewSQLStore(px)
	require.NoError(t, err)
	m := &idem.Method[int64]{Name: "Test.Charge"}
	f := idem.NewFingerprinter("Test.Charge")
	f.Field("amount")
	f.String("1")
	ctx := idem.ContextWithKey(context.Background(), "k")
	charge := func(ctx context.Context, tx *sql.Tx) (int64, error) {
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO payments (amount) VALUES (1) RETURNING id`).Scan(&id)
		return id, err
	}
	first, err := idem.Atomic(ctx, s, m, f.Sum(), charge)
	require.NoError(t, err)
	again, err := idem.Atomic(ctx, s, m, f.Sum(), charge)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	var n int
	require.NoError(t, px.QueryRow(`SELECT count(*) FROM payments`).Scan(&n))
	assert.Equal(t, 1, n, "the replay ran nothing")
}
