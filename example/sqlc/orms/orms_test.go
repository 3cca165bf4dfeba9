package orms

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/idemgen/idemgen/example/sqlc/transfers"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// method is what a generated wrapper would declare for Transfer.
var method = &idem.Method[transfers.TransferReceipt]{Name: "orms.Transfers.Transfer"}

// transferFunc is Transfer on one ORM.
type transferFunc func(ctx context.Context, tx *sql.Tx, req transfers.TransferRequest) (transfers.TransferReceipt, error)

// ormCase is one ORM: its Transfer, and how a caller inside the ORM's own
// transaction runs an idempotent call there (the *sql.Tx underneath).
type ormCase struct {
	name     string
	transfer func(db *sql.DB) transferFunc
	inOwnTx  func(t *testing.T, db *sql.DB, call func(tx *sql.Tx) error) error
}

var ormCases = []ormCase{{
	name: "bun",
	transfer: func(db *sql.DB) transferFunc {
		return NewBunTransfers(bun.NewDB(db, pgdialect.New())).Transfer
	},
	inOwnTx: func(t *testing.T, db *sql.DB, call func(tx *sql.Tx) error) error {
		return bun.NewDB(db, pgdialect.New()).RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			return call(tx.Tx) // bun.Tx embeds *sql.Tx
		})
	},
}, {
	name: "gorm",
	transfer: func(db *sql.DB) transferFunc {
		return NewGormTransfers(openGorm(db)).Transfer
	},
	inOwnTx: func(t *testing.T, db *sql.DB, call func(tx *sql.Tx) error) error {
		return openGorm(db).Transaction(func(tx *gorm.DB) error {
			return call(tx.Statement.ConnPool.(*sql.Tx))
		})
	},
}}

// openGorm opens GORM over db, a *sql.DB on pgx's database/sql driver.
func openGorm(db *sql.DB) *gorm.DB {
	g, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{})
	if err != nil {
		panic(err) // gorm.Open over an existing *sql.DB does not fail
	}
	return g
}

// seed creates alice (1) and bob (2) with balance cents each.
func seed(t *testing.T, db *sql.DB, balance int64) {
	t.Helper()
	_, err := db.ExecContext(t.Context(), `INSERT INTO accounts (owner, currency, balance_cents) VALUES ('alice', 'EUR', $1), ('bob', 'EUR', $1)`, balance)
	require.NoError(t, err)
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*) FROM transfers`).Scan(&n))
	return n
}

// TestORMs runs Transfer written with bun and with GORM through
// idem.Atomic, as the wrapper idemgen generates for it does: the retry
// replays the first receipt and writes nothing; a failing body leaves no row
// behind (the ORM wrote on the runtime's transaction); and a call in the caller's own ORM transaction (AtomicSQLInTx on
// the *sql.Tx underneath) commits with it.
func TestORMs(t *testing.T) {
	for _, c := range ormCases {
		t.Run(c.name, func(t *testing.T) {
			tdb := idemtest.New(t, idemtest.WithMigrations(idemtest.Migrations{Dir: "../transfers/migrations", Format: "goose"}))
			seed(t, tdb.SQL, 10_000)
			store, err := idem.NewSQLStore(tdb.SQL)
			require.NoError(t, err)
			body := c.transfer(tdb.SQL)
			req := transfers.TransferRequest{FromAccount: 1, ToAccount: 2, AmountCents: 1250, Currency: "EUR", Memo: "rent"}
			fp := idem.NewFingerprinter(method.Name)
			fp.Int(req.AmountCents)
			call := func(key string, body transferFunc) (transfers.TransferReceipt, error) {
				ctx := idem.ContextWithScope(idem.ContextWithKey(t.Context(), key), "tenant-a")
				return idem.Atomic(ctx, store, method, fp.Sum(), func(ctx context.Context, tx *sql.Tx) (transfers.TransferReceipt, error) {
					return body(ctx, tx, req)
				})
			}

			first, err := call("k1", body)
			require.NoError(t, err)
			again, err := call("k1", body)
			require.NoError(t, err)
			assert.Equal(t, first, again)
			assert.Equal(t, transfers.TransferReceipt{TransferID: first.TransferID, FromBalanceCents: 8750, ToBalanceCents: 11250}, first)
			assert.Equal(t, 1, count(t, tdb.SQL))

			boom := errors.New("boom")
			_, err = call("k2", func(ctx context.Context, tx *sql.Tx, r transfers.TransferRequest) (transfers.TransferReceipt, error) {
				if _, err := body(ctx, tx, r); err != nil {
					return transfers.TransferReceipt{}, err
				}
				return transfers.TransferReceipt{}, boom
			})
			require.ErrorIs(t, err, boom)
			assert.Equal(t, 1, count(t, tdb.SQL), "the failed body's transfer rolled back with the runtime's transaction")

			err = c.inOwnTx(t, tdb.SQL, func(tx *sql.Tx) error {
				ctx := idem.ContextWithScope(idem.ContextWithKey(t.Context(), "k3"), "tenant-a")
				_, err := idem.AtomicInTx(ctx, store, tx, method, fp.Sum(), func(ctx context.Context, tx *sql.Tx) (transfers.TransferReceipt, error) {
					return body(ctx, tx, req)
				})
				return err
			})
			require.NoError(t, err)
			assert.Equal(t, 2, count(t, tdb.SQL), "the call in the ORM's transaction committed with it")
		})
	}
}
