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
// its scope, and the conflict is on that row).
var scopePredicate = regexp.MustCompile(`(?:^|[^a-z_"])"?(?:idempotency_)?scope"? = \$\d+|ON CONFLICT \(scope,`)

// Every statement the runtime keeps for a ledger, and for an inline table,
// filters by scope, except the sweeps: on a database sharded by scope (Citus
// with scope as the distribution column) each then runs on one shard, and a
// sweep runs on every shard. A statement added without a scope predicate
// fails here (the statements actually sent are checked by
// TestEveryLedgerStatementFiltersByScope).
func TestStatementsFilterByScope(t *testing.T) {
	check := func(set any) {
		v := reflect.ValueOf(set)
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Type.Kind() != reflect.String {
				continue
			}
			sql := v.Field(i).String()
			require.NotEmpty(t, sql, f.Name)
			if f.Name == "sweep" {
				assert.False(t, scopePredicate.MatchString(sql), "the sweep runs on every shard: %s", f.Name)
				continue
			}
			assert.True(t, scopePredicate.MatchString(sql), "%s.%s has no scope predicate:\n%s", v.Type().Name(), f.Name, sql)
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
		v := reflect.ValueOf(newQueries(`"idempotency_keys"`, clock))
		for i := range v.NumField() {
			name, sql := v.Type().Field(i).Name, v.Field(i).String()
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
