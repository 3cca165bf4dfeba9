package idem_test

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Stamped is a response with everything JSON writes differently from how Go
// holds it: a monotonic reading, time.Local, a named zone, a timestamptz read
// back by pgx, an empty slice under omitempty.
type Stamped struct {
	Now     time.Time
	Local   time.Time
	Named   time.Time
	FromDB  time.Time
	Tags    []string `json:",omitempty"`
	Ratio   float64
	Comment string
}

func stampedMethod() *idem.Method[Stamped] { return &idem.Method[Stamped]{Name: "Test.Stamp"} }

func stamp(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (Stamped, error) {
	s := Stamped{
		Now:     time.Now(),
		Local:   time.Date(2030, 1, 2, 3, 4, 5, 6, time.Local),
		Named:   time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600)),
		Tags:    []string{},
		Comment: "a literal \\ufffd and a real \ufffd",
	}
	err := q.QueryRow(ctx, `SELECT now()`).Scan(&s.FromDB)
	return s, err
}

// TestReplayDeepEqualsFirstAnswer: the first caller gets the response as it
// is stored, so the replay is reflect.DeepEqual to it in every mode.
func TestReplayDeepEqualsFirstAnswer(t *testing.T) {
	e := newEnv(t)
	m := stampedMethod()
	modes := map[string]func(ctx context.Context) (Stamped, error){
		"atomic": func(ctx context.Context) (Stamped, error) {
			return idem.Atomic(ctx, e.store, m, fp("x"), func(ctx context.Context, tx pgx.Tx) (Stamped, error) { return stamp(ctx, tx) })
		},
		"intx": func(ctx context.Context) (Stamped, error) {
			var out Stamped
			err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
				var err error
				out, err = idem.AtomicInTx(ctx, e.store, tx, m, fp("x"), func(ctx context.Context, tx pgx.Tx) (Stamped, error) { return stamp(ctx, tx) })
				return err
			})
			return out, err
		},
		"external": func(ctx context.Context) (Stamped, error) {
			return idem.External(ctx, e.store, m, fp("x"), func(ctx context.Context) (Stamped, error) { return stamp(ctx, e.db.Pool) })
		},
	}
	for name, run := range modes {
		t.Run(name, func(t *testing.T) {
			ctx := keyed("stamp-" + name)
			first, err := run(ctx)
			require.NoError(t, err)
			replay, err := run(ctx)
			require.NoError(t, err)
			assert.True(t, reflect.DeepEqual(first, replay), "first %#v\nreplay %#v", first, replay)
			assert.Equal(t, "a literal \\ufffd and a real \ufffd", replay.Comment, "a genuine U+FFFD and the escape's letters are kept")
		})
	}
}

// TestUnstorableResponseRollsBack: a response JSON cannot hold faithfully is
// an error before COMMIT, so the work rolls back with the claim and nothing
// is stored; a retry runs again rather than replaying something else.
func TestUnstorableResponseRollsBack(t *testing.T) {
	for name, bad := range map[string]Stamped{
		"NaN":          {Ratio: math.NaN()},
		"+Inf":         {Ratio: math.Inf(1)},
		"invalid UTF8": {Comment: "caf\xe9"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			m := stampedMethod()
			runs := 0
			body := func(ctx context.Context, tx pgx.Tx) (Stamped, error) {
				runs++
				_, err := charge(100)(ctx, tx)
				return bad, err
			}
			for range 2 {
				_, err := idem.Atomic(keyed("bad"), e.store, m, fp("x"), body)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Test.Stamp")
			}
			assert.Equal(t, 2, runs, "nothing was stored, so the retry ran again")
			assert.Equal(t, 0, e.count(t, "payments"), "the work rolled back")
			assert.Equal(t, 0, e.count(t, "idempotency_keys"), "the claim rolled back")

			tx, err := e.db.Pool.Begin(context.Background())
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = idem.AtomicInTx(keyed("bad"), e.store, tx, m, fp("x"), body)
			require.Error(t, err)
			var n int
			require.NoError(t, tx.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
			assert.Equal(t, 0, n, "in a caller's transaction the work rolls back to the savepoint")
		})
	}
}
