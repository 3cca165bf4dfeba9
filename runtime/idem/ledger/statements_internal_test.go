package ledger

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/statements.golden from the statements")

// statementSet are the SQL fields of a set of statements (Statements,
// InlineStatements) by name, its first letter lower case, a RecordForms
// field's two forms as name.fresh and name.takeover.
func statementSet(set any) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(set)
	for i := range v.NumField() {
		name, f := lowerFirst(v.Type().Field(i).Name), v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			out[name] = f.String()
		case f.Type() == reflect.TypeFor[RecordForms]():
			out[name+".fresh"], out[name+".takeover"] = f.Field(0).String(), f.Field(1).String()
		}
	}
	return out
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// sortedNames are set's names in order.
func sortedNames(set map[string]string) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// dumpStatements renders every statement text the runtime sends, for
// sample tables: a ledger's and an inline table's (plain and
// schema-qualified), both clocks, the Citus forms and per-shard sweeps,
// the key's lock, the standby's statements and Citus's; then the ledger
// command's, the test harness's and the migration DDL.
func dumpStatements(t *testing.T) string {
	var b strings.Builder
	put := func(name, sql string) { fmt.Fprintf(&b, "-- %s\n%s\n\n", name, sql) }
	clocks := []struct {
		clock Clock
		name  string
	}{{DatabaseClock, "database's clock"}, {StoreClock, "store's clock"}}
	for _, table := range []string{"idempotency_keys", "billing.idempotency_keys"} {
		l, err := New(table)
		require.NoError(t, err)
		for _, c := range clocks {
			set := statementSet(l.Statements(c.clock))
			for _, n := range sortedNames(set) {
				put(fmt.Sprintf("ledger %s, %s: %s", table, c.name, n), set[n])
			}
		}
	}
	const storeNow = "'2026-12-06 23:00:00.123456+00'::timestamptz" // a store clock's instant, as the runtime writes it in
	put("ledger shard sweep, now()", ShardSweep("idempotency_keys_102008", "now()", 500))
	put("ledger shard sweep, store's clock", ShardSweep(`"billing"."idempotency_keys_102008"`, storeNow, 7))
	for _, table := range []string{"orders", "shop.orders"} {
		in, err := NewInline(table)
		require.NoError(t, err)
		set := statementSet(in.Statements())
		for _, n := range sortedNames(set) {
			put(fmt.Sprintf("inline %s: %s", table, n), set[n])
		}
	}
	put("inline shard sweep", InlineShardSweep("orders_102008", storeNow, "3600000000", "7"))
	put("key lock", KeyLockSQL)
	put("sync rep", SyncRepSQL)
	put("confirm replication", ConfirmReplicationSQL)
	put("confirm if sync rep", ConfirmIfSyncRepSQL)
	put("citus catalog", CitusCatalogSQL)
	put("citus shards", CitusShardsSQL)
	put("citus on shard", CitusOnShardSQL)
	put("citus loaded", CitusLoadedSQL)
	put("citus settings", CitusSettingsSQL)
	for i, st := range CitusClaimWait("1500ms") {
		put(fmt.Sprintf("citus claim wait %d", i), st)
	}
	put("citus put back", CitusPutBack("2s", "o'ff"))
	dumpCommandStatements(t, put)
	dumpHarnessStatements(t, put)
	dumpDDL(t, put)
	return b.String()
}

// dumpCommandStatements renders the ledger command's statements on sample
// tables with put.
func dumpCommandStatements(t *testing.T, put func(name, sql string)) {
	for _, table := range []string{"idempotency_keys", "billing.idempotency_keys"} {
		l, err := New(table)
		require.NoError(t, err)
		for _, mismatches := range []bool{false, true} {
			set := statementSet(l.CommandStatements(mismatches))
			for _, n := range sortedNames(set) {
				put(fmt.Sprintf("command, ledger %s, mismatch columns %v: %s", table, mismatches, n), set[n])
			}
		}
	}
	for _, table := range []string{"orders", "shop.orders"} {
		in, err := NewInline(table)
		require.NoError(t, err)
		set := statementSet(in.CommandStatements())
		for _, n := range sortedNames(set) {
			put(fmt.Sprintf("command, inline %s: %s", table, n), set[n])
		}
	}
	put("command, find tables", FindTablesSQL)
	put("command, table stats", TableStatsSQL)
}

// dumpHarnessStatements renders the test harness's statements on sample
// tables with put.
func dumpHarnessStatements(t *testing.T, put func(name, sql string)) {
	l, err := New("billing.idempotency_keys")
	require.NoError(t, err)
	set := statementSet(l.HarnessStatements())
	for _, n := range sortedNames(set) {
		put("harness, ledger billing.idempotency_keys: "+n, set[n])
	}
	in, err := NewInline("shop.orders")
	require.NoError(t, err)
	set = statementSet(in.HarnessStatements())
	for _, n := range sortedNames(set) {
		put("harness, inline shop.orders: "+n, set[n])
	}
}

// dumpDDL renders the migration DDL of a sample ledger and inline table
// with put.
func dumpDDL(t *testing.T, put func(name, sql string)) {
	l, err := New("billing.idempotency_keys")
	require.NoError(t, err)
	c, err := ParseCitus("citus:billing.orders.tenant_id")
	require.NoError(t, err)
	ix, mismatchAt := l.Indexes[0], l.Columns[14]
	require.Equal(t, "mismatch_at", mismatchAt.Name)
	storage, names := map[string]string{}, []string{}
	for _, p := range l.Storage {
		storage[p[0]] = p[1]
		names = append(names, p[0])
	}
	for _, d := range []struct{ name, sql string }{
		{"create table", l.CreateTableSQL()},
		{"create index", l.CreateIndexSQL(ix, false)},
		{"create index concurrently", l.CreateIndexSQL(ix, true)},
		{"drop index concurrently", l.DropIndexSQL(ix, true)},
		{"comments", l.CommentsSQL()},
		{"drop table", l.DropTableSQL()},
		{"add column mismatch_at", l.AddColumnSQL(mismatchAt)},
		{"drop column mismatch_at", l.DropColumnSQL(mismatchAt)},
		{"set storage", l.SetStorageSQL(storage)},
		{"reset storage", l.ResetStorageSQL(names)},
		{"distribute", l.DistributeSQL(c)},
		{"distribute if local", l.DistributeIfLocalSQL(c)},
		{"undistribute", l.UndistributeSQL()},
	} {
		put("ddl, ledger billing.idempotency_keys: "+d.name, d.sql)
	}
	in, err := NewInline("shop.orders")
	require.NoError(t, err)
	for i, sql := range in.DDL() {
		put(fmt.Sprintf("ddl, inline shop.orders: %d", i), sql)
	}
	for _, col := range in.Columns {
		put("ddl, inline shop.orders: add column "+col.Name, in.AddColumnSQL(col))
		put("ddl, inline shop.orders: drop column "+col.Name, in.DropColumnSQL(col))
	}
	put("ddl, inline shop.orders: drop index concurrently", in.DropIndexSQL(true))
	put("ddl, inline shop.orders: drop columns", in.DropColumnsSQL())
}

// TestStatementsGolden pins the text of every statement the runtime sends
// (testdata/statements.golden): a change to one is a diff a reviewer
// reads. go test -run TestStatementsGolden -args -update rewrites it.
func TestStatementsGolden(t *testing.T) {
	path := filepath.Join("testdata", "statements.golden")
	got := dumpStatements(t)
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// scopePredicate matches an equality on the scope column (the ledger's
// scope, or an inline table's idempotency_scope) with a parameter, or an
// INSERT whose conflict target starts with scope (the row written carries
// its scope, and the conflict is on that row), or an INSERT of the ledger's
// row, scope first (the fresh record: one row, its scope a parameter).
var scopePredicate = regexp.MustCompile(`(?:^|[^a-z_"])"?(?:idempotency_)?scope"? = \$\d+|ON CONFLICT \(scope,|^INSERT INTO \S+ AS t \(scope, `)

// Every statement the runtime keeps for a ledger, and for an inline table,
// filters by scope, except the sweeps: on a database sharded by scope (Citus
// with scope as the distribution column) each then runs on one shard, and a
// sweep runs on every shard. A statement added without a scope predicate
// fails here (the statements actually sent are checked by
// TestEveryLedgerStatementFiltersByScope).
func TestStatementsFilterByScope(t *testing.T) {
	check := func(set any) {
		for name, sql := range statementSet(set) {
			require.NotEmpty(t, sql, name)
			if name == "sweep" {
				assert.False(t, scopePredicate.MatchString(sql), "the sweep runs on every shard: %s", name)
				continue
			}
			assert.True(t, scopePredicate.MatchString(sql), "%T.%s has no scope predicate:\n%s", set, name, sql)
		}
	}
	check(newStatements(`"idempotency_keys"`, StoreClock))
	check(newStatements(`"idempotency_keys"`, DatabaseClock))
	schema, err := NewInline("orders")
	require.NoError(t, err)
	check(schema.Statements())
}

// No ledger statement chooses between the two clocks (Citus routes none
// that does): a store's statements read the time from its clock alone,
// the database's now() with parameters from $1, or the store's as $1.
func TestStatementsReadOneClock(t *testing.T) {
	for _, clock := range []Clock{StoreClock, DatabaseClock} {
		for name, sql := range statementSet(newStatements(`"idempotency_keys"`, clock)) {
			assert.NotRegexp(t, `coalesce\(\$`, sql, "%s chooses between clocks", name)
			usesParam := regexp.MustCompile(`\$1\b`).MatchString(sql)
			switch {
			case clock == StoreClock && strings.Contains(sql, "now()"):
				t.Errorf("%s reads now() on a store with a clock:\n%s", name, sql)
			case clock == DatabaseClock && strings.Contains(sql, "$1::timestamptz"):
				t.Errorf("%s reads the time as $1 on a store without a clock:\n%s", name, sql)
			case !usesParam:
				t.Errorf("%s has no $1:\n%s", name, sql)
			}
		}
	}
	q := newStatements("t", DatabaseClock)
	assert.Equal(t, "UPDATE t SET locked_until = now()\nWHERE scope = $1 AND method = $2 AND key = $3 AND fence = $4 AND intention IS NOT DISTINCT FROM $5::uuid AND status = 'in_progress'", q.Release)
}

// TestShardStatements checks the per-shard sweeps' statements: the shard's
// table and the literals where the statements on one server take
// parameters.
func TestShardStatements(t *testing.T) {
	got := ShardSweep("idempotency_keys_102008", "now()", 500)
	assert.Contains(t, got, "DELETE FROM idempotency_keys_102008 WHERE")
	assert.Contains(t, got, "FROM idempotency_keys_102008 WHERE expires_at <= now() AND (locked_until IS NULL OR locked_until <= now())")
	assert.Contains(t, got, "LIMIT 500 FOR UPDATE SKIP LOCKED")

	inline := InlineShardSweep("orders_102008", "now()", "3600000000", "7")
	assert.Contains(t, inline, `FROM orders_102008
    WHERE "idempotency_key" IS NOT NULL AND "idempotency_claimed_at" + 3600000000 * interval '1 microsecond' <= now()
    LIMIT 7 FOR UPDATE SKIP LOCKED`)
	assert.NotContains(t, inline, `"idempotency_scope" = NULL`, "the scope, a shard's distribution column, stays")
}

// renumber reads parameters as a regular expression would (\$([0-9]+)):
// a dollar sign and every digit after it; a dollar sign without a digit
// stays.
func TestRenumber(t *testing.T) {
	plus := func(n int) int { return n + 10 }
	assert.Equal(t, "$11 $22 $$ $ $x $110::int $", renumber("$1 $12 $$ $ $x $100::int $", plus))
	assert.Equal(t, "$$11", renumber("$$1", plus))
	assert.Equal(t, "", renumber("", plus))
	assert.Equal(t, "$1, $2, $8, $9", withoutParam("$1, $2, $9, $10", 8))
	assert.Equal(t, "now() $1", atDatabaseClock("$1::timestamptz $2"))
}
