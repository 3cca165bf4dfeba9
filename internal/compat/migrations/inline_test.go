package migrations_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestInlineToolsApplyMigrations applies the inline-mode migrations (the
// golden files gen/migrations' TestInlineGolden holds equal to what Plan
// writes, after the user's migration that creates payments) with each real
// tool (down and up again where the tool rolls back), then checks the
// columns and the index, and makes idempotent calls against the table.
func TestInlineToolsApplyMigrations(t *testing.T) {
	for _, format := range migrations.Formats() {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			golden := filepath.Join("..", "..", "..", "gen", "migrations", "testdata", format, "inline")
			planned, err := migrations.ReadDir(os.DirFS(golden), ".")
			require.NoError(t, err)
			require.NotEmpty(t, planned, "golden files in %s", golden)
			dir := writeDir(t, merge(userFiles(format), planned))
			db := idemtest.New(t, idemtest.WithoutLedger())
			tl := tools[format]
			require.NoError(t, tl.up(t, ctx, db.URL, dir), "up")
			checkInline(t, db.Pool)
			if tl.down != nil {
				require.NoError(t, tl.down(t, ctx, db.URL, dir), "down")
				assert.False(t, exists(t, db.Pool, "payments"), "everything rolled back")
				require.NoError(t, tl.up(t, ctx, db.URL, dir), "up again")
				checkInline(t, db.Pool)
			}
		})
	}
}

// checkInline checks the business table after the inline migrations: the
// nullable columns, the valid partial unique index, and idem.Inline working
// on it (one row, a replay, a refused duplicate naming the index).
func checkInline(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	s, err := ledger.NewInline("payments")
	require.NoError(t, err)
	for _, c := range s.Columns {
		var notNull bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT attnotnull FROM pg_attribute WHERE attrelid = 'payments'::regclass AND attname = $1`, c.Name).Scan(&notNull), "column %s", c.Name)
		assert.False(t, notNull, "column %s is nullable", c.Name)
	}
	var valid, unique bool
	var pred string
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid, indisunique, pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = to_regclass($1)`, s.IndexName()).Scan(&valid, &unique, &pred))
	assert.True(t, valid)
	assert.True(t, unique)
	assert.Equal(t, "(idempotency_key IS NOT NULL)", pred)

	store, err := idem.NewStore(pool)
	require.NoError(t, err)
	m := &idem.InlineMethod[int64]{Name: "Payments.Capture", Table: "payments", Retention: time.Hour}
	f := idem.NewFingerprinter(m.Name)
	f.Field("amount")
	f.Int(100)
	fp := f.Sum()
	body := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		k, _ := idem.InlineKeyFrom(ctx)
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (amount, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES (100, $1, $2, $3) RETURNING id`, k.Scope, k.Key, k.Fingerprint).Scan(&id)
		return id, err
	}
	lookup := func(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (int64, []byte, error) {
		var id int64
		var stored []byte
		err := tx.QueryRow(ctx, `SELECT id, idempotency_fingerprint FROM payments WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&id, &stored)
		return id, stored, err
	}
	kctx := idem.ContextWithKey(ctx, "inline-key")
	first, err := idem.Inline(kctx, store, m, fp, lookup, body)
	require.NoError(t, err)
	rctx, outcome := idem.ContextWithOutcome(kctx)
	second, err := idem.Inline(rctx, store, m, fp, lookup, body)
	require.NoError(t, err)
	assert.True(t, outcome.Replayed())
	assert.Equal(t, first, second)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE idempotency_key = 'inline-key'`).Scan(&n))
	assert.Equal(t, 1, n)
	_, err = pool.Exec(ctx, `INSERT INTO payments (amount) VALUES (1), (2)`)
	require.NoError(t, err, "rows without a key are not indexed")
	_, err = pool.Exec(ctx, `INSERT INTO payments (amount, idempotency_scope, idempotency_key) VALUES (3, '', 'inline-key')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23505", pgErr.Code)
	assert.Equal(t, s.IndexName(), pgErr.ConstraintName)
	var stamped bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT idempotency_claimed_at IS NOT NULL FROM payments WHERE id = $1`, first).Scan(&stamped))
	assert.True(t, stamped, "the claimed-at default stamps new rows")
}
