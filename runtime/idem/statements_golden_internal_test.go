package idem

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

var updateGolden = flag.Bool("update-statements", false, "rewrite ledger/testdata/statements.golden")

// dumpStatements renders every statement text the runtime builds for a
// sample ledger and inline table, both clocks, with the Citus forms.
func dumpStatements(t *testing.T) string {
	var b strings.Builder
	put := func(name, sql string) { fmt.Fprintf(&b, "-- %s\n%s\n\n", name, sql) }
	for _, table := range []string{"idempotency_keys", "billing.idempotency_keys"} {
		l, err := ledger.New(table)
		require.NoError(t, err)
		for _, clock := range []bool{false, true} {
			set := statements(newQueries(l.Table.Quoted(), clock))
			clockName := map[bool]string{false: "database's clock", true: "store's clock"}[clock]
			names := make([]string, 0, len(set))
			for n := range set {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				put(fmt.Sprintf("ledger %s, %s: %s", table, clockName, n), set[n])
			}
		}
	}
	put("ledger shard sweep, now()", ledgerShardSweep("idempotency_keys_102008", "now()", 500))
	s := &Store{cfg: config{claimWait: 1500 * time.Millisecond, clock: func() time.Time { return time.Date(2026, 12, 6, 23, 0, 0, 123456000, time.UTC) }}}
	put("ledger shard sweep, store's clock", ledgerShardSweep(`"billing"."idempotency_keys_102008"`, s.nowLiteral(), 7))
	for _, table := range []string{"orders", "shop.orders"} {
		in, err := ledger.NewInline(table)
		require.NoError(t, err)
		set := statements(newInlineQueries(in))
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			put(fmt.Sprintf("inline %s: %s", table, n), set[n])
		}
	}
	put("inline shard sweep", inlineSweepSQL("orders_102008", s.nowLiteral(), "3600000000", "7"))
	put("key lock", keyLockSQL)
	put("sync rep", syncRepSQL)
	put("confirm replication", confirmReplicationSQL)
	put("confirm if sync rep", confirmIfSyncRepSQL)
	put("citus catalog", citusCatalogSQL)
	put("citus shards", citusShardsSQL)
	put("citus on shard", citusOnShardSQL)
	put("citus loaded", citusLoadedSQL)
	put("citus settings", citusSettingsSQL)
	for i, st := range s.citusClaimWait() {
		put(fmt.Sprintf("citus claim wait %d", i), st)
	}
	put("citus put back", "SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL lock_timeout = "+quoteLiteral("2s")+
		"; SET LOCAL citus.propagate_set_commands = "+quoteLiteral("o'ff"))
	return b.String()
}

// TestStatementsGolden pins every statement text the runtime sends.
func TestStatementsGolden(t *testing.T) {
	path := filepath.Join("ledger", "testdata", "statements.golden")
	got := dumpStatements(t)
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
