package idem_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// stmtLog records, on a pool's connections, the round trips (a query, or a
// batch of pipelined statements) and the statements that travel. A
// ROLLBACK is left out of both: a replay sends it after the caller has its
// answer. BEGIN and COMMIT are recorded in capitals, whoever sends them
// (database/sql's driver writes them in lower case).
type stmtLog struct {
	mu    sync.Mutex
	trips int
	stmts []string
}

func (l *stmtLog) add(trip bool, sql string) {
	if strings.EqualFold(sql, "rollback") {
		return
	}
	if strings.EqualFold(sql, "begin") || strings.EqualFold(sql, "commit") {
		sql = strings.ToUpper(sql)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if trip {
		l.trips++
	}
	if sql != "" {
		l.stmts = append(l.stmts, sql)
	}
}

func (l *stmtLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(true, d.SQL)
	return ctx
}

func (l *stmtLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *stmtLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.add(true, "")
	return ctx
}

func (l *stmtLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(false, d.SQL)
}

func (l *stmtLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// record returns the round trips and statements of fn.
func (l *stmtLog) record(fn func()) (int, []string) {
	l.mu.Lock()
	trips, n := l.trips, len(l.stmts)
	l.mu.Unlock()
	fn()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trips - trips, slices.Clone(l.stmts[n:])
}

// pathTrips are the round trips and statements of one path's calls.
type pathTrips struct {
	trips map[string]int
	stmts map[string][]string
}

// recordPath runs the calls the docs compare on path p, on one warm
// connection, and records each.
func recordPath(t *testing.T, p path) pathTrips {
	var l stmtLog
	db := idemtest.New(t, idemtest.WithSetup(append([]string{paymentsDDL}, ordersDDL(t)...)...),
		idemtest.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = &l; c.MaxConns = 1 }))
	e := &env{db: db, m: chargeMethod()}
	s, err := p.newStore(db)
	require.NoError(t, err)
	e.store = s
	ctx := context.Background()
	atomicCall := func(ctx context.Context) func() {
		return func() { require.NoError(t, e.callOn(p, ctx, "1", 1).err) }
	}
	// The caller's BEGIN and COMMIT are the caller's: recorded apart.
	inTx := func(ctx context.Context, record func(func()) (int, []string)) (int, []string) {
		tx, err := p.begin(ctx, db)
		require.NoError(t, err)
		trips, stmts := record(func() {
			_, err := p.atomicInTx(ctx, s, tx, e.m, fp("1"), chargeOn(1))
			require.NoError(t, err)
		})
		require.NoError(t, tx.commit(ctx))
		return trips, stmts
	}
	plain := func() {
		tx, err := p.begin(ctx, db)
		require.NoError(t, err)
		_, err = chargeOn(1)(ctx, tx)
		require.NoError(t, err)
		require.NoError(t, tx.commit(ctx))
	}
	inline := func(key string) func() {
		return func() {
			_, err := p.inline(keyed(key), s, ordersMethod(), fp("book"), createOrderOn("book", 1))
			require.NoError(t, err)
		}
	}
	// Warm the statement cache: preparing is a round trip of its own.
	unrecorded := func(fn func()) (int, []string) { fn(); return 0, nil }
	plain()
	inline("warm")()
	inline("warm")()
	atomicCall(keyed("warm"))()
	atomicCall(keyed("warm"))()
	atomicCall(idem.ContextWithRetry(keyed("warm")))()
	inTx(keyed("t"), unrecorded)
	inTx(keyed("t"), unrecorded)
	inTx(idem.ContextWithRetry(keyed("t")), unrecorded)
	_, err = db.Pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = 't'`)
	require.NoError(t, err)

	r := pathTrips{trips: map[string]int{}, stmts: map[string][]string{}}
	r.trips["work alone"], r.stmts["work alone"] = l.record(plain)
	idem.ForgetReplays(s) // the unmarked retry is taken for a first attempt
	r.trips["claimed"], r.stmts["claimed"] = l.record(atomicCall(keyed("k")))
	r.trips["replay"], r.stmts["replay"] = l.record(atomicCall(idem.ContextWithRetry(keyed("k"))))
	r.trips["replay, unmarked"], r.stmts["replay, unmarked"] = l.record(atomicCall(keyed("k")))
	idem.ForgetReplays(s)
	r.trips["in tx, claimed"], r.stmts["in tx, claimed"] = inTx(keyed("t"), l.record)
	r.trips["in tx, replay"], r.stmts["in tx, replay"] = inTx(idem.ContextWithRetry(keyed("t")), l.record)
	r.trips["in tx, replay, unmarked"], r.stmts["in tx, replay, unmarked"] = inTx(keyed("t"), l.record)
	r.trips["inline, claimed"], r.stmts["inline, claimed"] = l.record(inline("i"))
	r.trips["inline, replay"], r.stmts["inline, replay"] = l.record(inline("i"))
	return r
}

// TestRoundTripsBothPaths pins the round trips of the pgx path and the
// database/sql path for the same work (one INSERT), and checks that the
// database/sql path sends no statement the pgx path does not: it sends the
// same statements one at a time. Inline mode's replay is the exception: its
// lookup takes a *sql.Tx, so it runs in a transaction of its own.
func TestRoundTripsBothPaths(t *testing.T) {
	got := map[string]pathTrips{}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) { got[p.name] = recordPath(t, p) })
	}
	pg, sq := got[pgxPath.name], got[sqlPath.name]
	want := map[string][2]int{ // pgx, database/sql
		"work alone": {3, 3}, // BEGIN, INSERT, COMMIT
		// A first attempt, no lookup: BEGIN+key lock+INSERT, record+COMMIT;
		// database/sql: BEGIN, the key's lock and COMMIT alone.
		"claimed": {2, 5},
		// A retry marked idem.ContextWithRetry: the lookup.
		"replay": {1, 1},
		// An unmarked retry: the first attempt's statements, the record
		// refused (database/sql sends no COMMIT after it), then, after
		// the ROLLBACK, the lookup.
		"replay, unmarked": {3, 5},
		// A first attempt, no lookup: SAVEPOINT+key lock+INSERT,
		// record+RELEASE; database/sql: each alone.
		"in tx, claimed": {2, 5},
		// A retry marked idem.ContextWithRetry: the lookup.
		"in tx, replay": {1, 1},
		// An unmarked retry: the first attempt's statements, the record
		// refused, then ROLLBACK TO SAVEPOINT and RELEASE, and the lookup;
		// database/sql sends no RELEASE after the refused record.
		"in tx, replay, unmarked": {4, 6},
		// pgx: BEGIN+INSERT, check+COMMIT; database/sql: each alone.
		"inline, claimed": {2, 4},
		// pgx: BEGIN+INSERT, then ROLLBACK+syncRep+free+lookup; database/sql:
		// BEGIN, INSERT, then (after ROLLBACK) BEGIN, free, lookup, COMMIT
		// and the confirmation that writes nothing without a standby.
		"inline, replay": {2, 7},
	}
	for name, w := range want {
		assert.Equal(t, w[0], pg.trips[name], "pgx: %s: %q", name, pg.stmts[name])
		assert.Equal(t, w[1], sq.trips[name], "database/sql: %s: %q", name, sq.stmts[name])
		t.Logf("%-15s pgx %d  database/sql %d", name, pg.trips[name], sq.trips[name])
		if name == "inline, replay" {
			continue // the lookup takes a *sql.Tx: one of its own, committed
		}
		for _, stmt := range sq.stmts[name] {
			assert.Contains(t, pg.stmts[name], stmt, "%s: database/sql sends a statement the pgx path does not", name)
		}
	}
	assert.Equal(t, fmt.Sprint(pg.stmts["claimed"]), fmt.Sprint(sq.stmts["claimed"]), "claimed: the same statements")
	assert.Equal(t, fmt.Sprint(pg.stmts["replay"]), fmt.Sprint(sq.stmts["replay"]), "a replay sends the same statements")
	assert.Equal(t, fmt.Sprint(pg.stmts["replay, unmarked"][:3]), fmt.Sprint(sq.stmts["replay, unmarked"][:3]),
		"an unmarked replay starts as a first attempt")
}
