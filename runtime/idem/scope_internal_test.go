package idem

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// scopePredicate matches an equality on the scope column (the ledger's
// scope, or an inline table's idempotency_scope) with a parameter, or an
// INSERT whose conflict target starts with scope (the row written carries
// its scope, and the conflict is on that row), or an INSERT of the ledger's
// row, scope first (the fresh record: one row, its scope a parameter).
var scopePredicate = regexp.MustCompile(`(?:^|[^a-z_"])"?(?:idempotency_)?scope"? = \$\d+|ON CONFLICT \(scope,|^INSERT INTO \S+ AS t \(scope, `)

// statements are the SQL fields of a set of statements (queries,
// inlineQueries) by name, a recordStmts field's two forms as name.fresh and
// name.takeover. Fields of other types (inlineQueries's schema) are left
// out.
func statements(set any) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(set)
	for i := range v.NumField() {
		name, f := v.Type().Field(i).Name, v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			out[name] = f.String()
		case f.Type() == reflect.TypeFor[recordStmts]():
			out[name+".fresh"], out[name+".takeover"] = f.Field(0).String(), f.Field(1).String()
		}
	}
	return out
}

// Every statement the runtime keeps for a ledger, and for an inline table,
// filters by scope, except the sweeps: on a database sharded by scope (Citus
// with scope as the distribution column) each then runs on one shard, and a
// sweep runs on every shard. A statement added without a scope predicate
// fails here (the statements actually sent are checked by
// TestEveryLedgerStatementFiltersByScope).
func TestStatementsFilterByScope(t *testing.T) {
	check := func(set any) {
		for name, sql := range statements(set) {
			require.NotEmpty(t, sql, name)
			if name == "sweep" {
				assert.False(t, scopePredicate.MatchString(sql), "the sweep runs on every shard: %s", name)
				continue
			}
			assert.True(t, scopePredicate.MatchString(sql), "%T.%s has no scope predicate:\n%s", set, name, sql)
		}
	}
	check(newQueries(`"idempotency_keys"`, true))
	check(newQueries(`"idempotency_keys"`, false))
	schema, err := ledger.NewInline("orders")
	require.NoError(t, err)
	check(newInlineQueries(schema))
}

// No ledger statement chooses between the two clocks (Citus routes none
// that does): a store's statements read the time from its clock alone,
// the database's now() with parameters from $1, or the store's as $1.
func TestStatementsReadOneClock(t *testing.T) {
	for _, clock := range []bool{true, false} {
		for name, sql := range statements(newQueries(`"idempotency_keys"`, clock)) {
			assert.NotRegexp(t, `coalesce\(\$`, sql, "%s chooses between clocks", name)
			usesParam := regexp.MustCompile(`\$1\b`).MatchString(sql)
			switch {
			case clock && strings.Contains(sql, "now()"):
				t.Errorf("%s reads now() on a store with a clock:\n%s", name, sql)
			case !clock && strings.Contains(sql, "$1::timestamptz"):
				t.Errorf("%s reads the time as $1 on a store without a clock:\n%s", name, sql)
			case !usesParam:
				t.Errorf("%s has no $1:\n%s", name, sql)
			}
		}
	}
	q := newQueries("t", false)
	assert.Equal(t, "UPDATE t SET locked_until = now()\nWHERE scope = $1 AND method = $2 AND key = $3 AND fence = $4 AND intention IS NOT DISTINCT FROM $5::uuid AND status = 'in_progress'", q.release)
}
