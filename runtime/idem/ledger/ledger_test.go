package ledger_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

func TestParseIdent(t *testing.T) {
	id, err := ledger.ParseIdent("billing.idempotency_keys")
	require.NoError(t, err)
	assert.Equal(t, `"billing"."idempotency_keys"`, id.Quoted())
	assert.Equal(t, "billing.idempotency_keys", id.String())
	assert.Equal(t, "idempotency_keys_pkey", id.Derived("pkey"))
	assert.Equal(t, `"billing"."idempotency_keys_expires_at_idx"`, id.QuotedDerived("expires_at_idx"))
	assert.Equal(t, `"a""b"`, ledger.Quote(`a"b`))
	for _, ok := range []string{"a", "_x", "t1", strings.Repeat("a", 63)} {
		_, err := ledger.ParseIdent(ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "A", "a-b", "a.b.c", `a"b`, "a;drop", strings.Repeat("a", 64), "1a", "a.", "é"} {
		_, err := ledger.ParseIdent(bad)
		assert.Error(t, err, bad)
	}
}

func TestSchemaDDL(t *testing.T) {
	s, err := ledger.New(ledger.DefaultTable)
	require.NoError(t, err)
	ddl := s.DDL()
	require.Len(t, ddl, 2)
	assert.Contains(t, ddl[0], `CREATE TABLE "idempotency_keys" (`)
	assert.Contains(t, ddl[0], `CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope", "method", "key")`)
	assert.Contains(t, ddl[0], "autovacuum_vacuum_scale_factor = 0.01")
	assert.Contains(t, ddl[1], `CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" ("expires_at")`)
	assert.Contains(t, s.CreateIndexSQL(s.Indexes[0], true), "CREATE INDEX CONCURRENTLY")
	_, err = ledger.New(`x"; DROP TABLE y; --`)
	assert.Error(t, err)
}

func TestTableNameLeavesRoomForDerivedNames(t *testing.T) {
	longest := strings.Repeat("t", 48) // + "_expires_at_idx" = 63 bytes
	s, err := ledger.New("billing." + longest)
	require.NoError(t, err)
	assert.Len(t, s.Table.Derived("expires_at_idx"), 63)
	for _, n := range []int{49, 62, 63} {
		_, err := ledger.New(strings.Repeat("t", n))
		require.Error(t, err, n)
		assert.Contains(t, err.Error(), "at most 48 bytes")
	}
}
