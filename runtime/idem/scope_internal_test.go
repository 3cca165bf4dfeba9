package idem

import (
	"reflect"
	"regexp"
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
	check(newQueries(`"idempotency_keys"`))
	schema, err := ledger.NewInline("orders")
	require.NoError(t, err)
	check(newInlineQueries(schema))
}
