package idem_test

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// sentStatements records the text of every statement a pool sends, alone or
// in a batch.
type sentStatements struct {
	mu  sync.Mutex
	sql map[string]bool
}

func (s *sentStatements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql[sql] = true
}

func (s *sentStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *sentStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentStatements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *sentStatements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}

func (s *sentStatements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// scoped matches a scope predicate: an equality on the ledger's scope or
// an inline table's idempotency_scope with a parameter, an INSERT whose
// conflict target starts with scope, or an INSERT of the ledger's row,
// scope first (the fresh record).
var scoped = regexp.MustCompile(`(?:^|[^a-z_"])"?(?:idempotency_)?scope"? = \$\d+|ON CONFLICT \(scope,|^INSERT INTO \S+ AS t \(scope, `)

// TestEveryLedgerStatementFiltersByScope runs every path of the three
// modes (claim, replay, mismatch, takeover, caller's transaction, steps,
// heartbeat, release, an outcome that cannot be stored) and the sweeps,
// records every statement sent, and checks that each one that touches the
// ledger or an inline table's key columns filters by scope, except the
// sweeps (the statements with SKIP LOCKED), which run on every shard of a
// database sharded by scope.
func TestEveryLedgerStatementFiltersByScope(t *testing.T) {
	sent := &sentStatements{sql: map[string]bool{}}
	clock := idemtest.NewClock(time.Time{})
	db := idemtest.New(t, idemtest.WithSetup(append([]string{paymentsDDL}, ordersDDL(t)...)...),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sent }))
	s, err := idem.NewStore(db.Pool, idem.WithClock(clock.Now), idem.WithHeartbeat(10*time.Millisecond))
	require.NoError(t, err)
	ctx := idem.ContextWithScope(context.Background(), "tenant")
	k := func(key string) context.Context { return idem.ContextWithKey(ctx, key) }

	// Atomic: claim, replay, mismatch, takeover after expiry, and in the
	// caller's transaction.
	m := chargeMethod()
	for range 2 {
		_, err = idem.Atomic(k("a"), s, m, fp("1"), charge(1))
		require.NoError(t, err)
	}
	_, err = idem.Atomic(k("a"), s, m, fp("2"), charge(1))
	require.ErrorIs(t, err, idem.ErrMismatch)
	clock.Advance(retention + time.Minute)
	_, err = idem.Atomic(k("a"), s, m, fp("1"), charge(1))
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	for range 2 {
		_, err = idem.AtomicInTx(k("a-tx"), s, tx, m, fp("1"), charge(1))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))

	// External: claim, a step, the heartbeat, the outcome, replay; a
	// released key; an outcome that cannot be stored.
	pm := payoutMethod()
	beat := func(ctx context.Context) (Payout, error) {
		if _, err := idem.Step(ctx, "transfer", func(context.Context) (string, error) { return "tr", nil }); err != nil {
			return Payout{}, err
		}
		waitSent(t, sent, "greatest(expires_at,") // the heartbeat
		return Payout{Ref: "tr"}, nil
	}
	for range 2 {
		_, err = idem.External(k("x"), s, pm, payFp("1"), beat)
		require.NoError(t, err)
	}
	_, err = idem.External(k("x-released"), s, pm, payFp("1"), func(context.Context) (Payout, error) { return Payout{}, errors.New("try again") })
	require.Error(t, err)
	_, err = idem.External(k("x-nan"), s, &idem.Method[Quote]{Name: "Test.Quote", Retention: retention, LockTimeout: lockTimeout}, payFp("1"),
		func(context.Context) (Quote, error) { return Quote{Rate: math.NaN()}, nil })
	require.ErrorIs(t, err, idem.ErrOutcomeNotRecorded)

	// Inline: claim, replay, and in the caller's transaction.
	om := ordersMethod()
	for range 2 {
		_, err = idem.Inline(k("i"), s, om, fp("book"), orderByKey, createOrder("book", 1))
		require.NoError(t, err)
	}
	tx, err = db.Pool.Begin(ctx)
	require.NoError(t, err)
	for range 2 {
		_, err = idem.InlineInTx(k("i-tx"), s, tx, om, fp("book"), orderByKey, createOrder("book", 1))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))

	clock.Advance(48 * time.Hour)
	_, err = s.Sweep(ctx, 0)
	require.NoError(t, err)
	_, err = idem.SweepInline(ctx, s, om, 0)
	require.NoError(t, err)

	sent.mu.Lock()
	defer sent.mu.Unlock()
	checked := 0
	for sql := range sent.sql {
		if !strings.Contains(sql, idem.DefaultTable) && !strings.Contains(sql, `"idempotency_key"`) {
			continue // not a ledger statement: BEGIN, COMMIT, the bodies' own
		}
		checked++
		if strings.Contains(sql, "SKIP LOCKED") {
			continue // a sweep
		}
		assert.Regexp(t, scoped, sql, "a ledger statement without a scope predicate")
	}
	assert.GreaterOrEqual(t, checked, 12, "ledger statements seen")
}

// waitSent waits until a statement containing part has been sent.
func waitSent(t *testing.T, s *sentStatements, part string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for sql := range s.sql {
			if strings.Contains(sql, part) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no statement containing %q was sent", part)
}
