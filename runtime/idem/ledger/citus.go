package ledger

import (
	"fmt"
	"strings"
)

// CitusColumn is the ledger's distribution column on Citus: the tenant.
// Every statement a call sends filters on it by equality and the primary
// key (scope, method, key) starts with it, so each one routes to one shard.
const CitusColumn = "scope"

// Citus says how a ledger is distributed on a Citus cluster: by scope,
// co-located with a business table the user distributes by tenant, so a
// claim and the method's own writes for one tenant land on one shard.
type Citus struct {
	// Colocate is the business table the ledger is co-located with.
	Colocate Ident
	// Column is Colocate's distribution column, as the user distributed it
	// (create_distributed_table). It must be of type text, as scope is:
	// Citus co-locates only tables whose distribution columns have one type.
	Column string
}

// CitusPrefix starts the value of the -distributed setting.
const CitusPrefix = "citus:"

// ParseCitus parses a -distributed value, "citus:TABLE.COLUMN" (TABLE may
// be schema-qualified: citus:billing.orders.tenant_id). Each part must be a
// safe identifier (ParseIdent's rule).
func ParseCitus(s string) (Citus, error) {
	rest, ok := strings.CutPrefix(s, CitusPrefix)
	if !ok {
		return Citus{}, fmt.Errorf("%q: want citus:TABLE.COLUMN, the business table the ledger is co-located with and the column Citus distributes it by, e.g. citus:orders.tenant_id", s)
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return Citus{}, fmt.Errorf("%q names no column: want citus:TABLE.COLUMN, e.g. citus:orders.tenant_id", s)
	}
	table, col := rest[:i], rest[i+1:]
	id, err := ParseIdent(table)
	if err != nil {
		return Citus{}, fmt.Errorf("%q: co-located %w", s, err)
	}
	if !validIdentPart(col) {
		return Citus{}, fmt.Errorf("%q: column %q is not a safe SQL identifier: it must match [a-z_][a-z0-9_]* and be at most 63 bytes", s, col)
	}
	return Citus{Colocate: id, Column: col}, nil
}

// String renders the setting as written: citus:TABLE.COLUMN.
func (c Citus) String() string { return CitusPrefix + c.Colocate.String() + "." + c.Column }

// DistributeSQL renders the statement that makes the ledger a distributed
// table: hash-distributed by scope, its shards placed with those of the
// co-located table. Identifiers go in as string literals of their quoted
// form, which regclass parses back to the same names.
func (l Schema) DistributeSQL(c Citus) string {
	return fmt.Sprintf("SELECT create_distributed_table(%s, %s, colocate_with => %s);",
		literal(l.Table.Quoted()), literal(CitusColumn), literal(c.Colocate.Quoted()))
}

// CheckInline reports why the inline-mode index of table s cannot hold on
// a Citus cluster where c is the ledger's setting: Citus accepts a unique
// index on a distributed table only when it contains the distribution
// column. The index is (idempotency_scope, idempotency_key); widening it
// with another column would let two rows share a key, so the table must be
// the co-located one, distributed by idempotency_scope.
func (c Citus) CheckInline(s Inline) error {
	if !sameTable(s.Table, c.Colocate) {
		return fmt.Errorf("inline table %s is not the co-located table %s named by -distributed=%s: on Citus the partial unique index (%s, %s) must contain the table's distribution column, and only that table's is known, so a package's inline methods keep their keys in %s alone (distributed by %s)",
			s.Table, c.Colocate, c, InlineScopeColumn, InlineKeyColumn, c.Colocate, InlineScopeColumn)
	}
	if c.Column != InlineScopeColumn {
		return fmt.Errorf("-distributed=%s: the inline table %s is distributed by %s, which its partial unique index (%s, %s) does not contain, and Citus refuses a unique index without the distribution column; adding %s to the index would let two rows of different %s hold one key, so distribute %s by %s (the tenant, as the scope is) instead",
			c, s.Table, c.Column, InlineScopeColumn, InlineKeyColumn, c.Column, c.Column, s.Table, InlineScopeColumn)
	}
	return nil
}

// literal renders s as a SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sameTable reports whether a and b name one table, an unqualified name
// standing for the public schema's.
func sameTable(a, b Ident) bool {
	norm := func(id Ident) Ident {
		if id.Schema == "" {
			id.Schema = "public"
		}
		return id
	}
	return norm(a) == norm(b)
}

// The runtime's statements on a Citus cluster, besides the Citus forms of
// the ledger's (Statements).

// CitusCatalogSQL tells whether the database has Citus's catalog.
const CitusCatalogSQL = `SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL`

// CitusShardsSQL lists the shards of table $1 when it is hash-distributed,
// as one JSON array (one row, so that both drivers scan it alike): each
// shard's id, name (shard_name), the node holding its first placement
// (host, port) and its count of placements.
const CitusShardsSQL = `SELECT coalesce(json_agg(json_build_object(
    'id', s.shardid, 'name', shard_name(s.logicalrelid, s.shardid),
    'host', p.nodename, 'port', p.nodeport,
    'placements', (SELECT count(*) FROM pg_dist_shard_placement c WHERE c.shardid = s.shardid)) ORDER BY s.shardid), '[]')::text
FROM pg_dist_shard s
JOIN pg_dist_partition d ON d.logicalrelid = s.logicalrelid AND d.partmethod = 'h'
JOIN LATERAL (SELECT nodename, nodeport FROM pg_dist_shard_placement c WHERE c.shardid = s.shardid ORDER BY placementid LIMIT 1) p ON true
WHERE s.logicalrelid = to_regclass($1)`

// CitusOnShardSQL runs command $3 on the node $1:$2 holding a shard.
const CitusOnShardSQL = `SELECT success, result FROM master_run_on_worker(ARRAY[$1::text], ARRAY[$2::int], ARRAY[$3::text], false)`

// CitusLoadedSQL tells whether the server runs Citus: its settings exist.
const CitusLoadedSQL = `SELECT current_setting('citus.propagate_set_commands', true) IS NOT NULL`

// CitusClaimWait is the prelude of the record on Citus (RecordCitus): the
// claim wait (a lock_timeout setting, e.g. 250ms) as a transaction-local
// lock_timeout. A lock_timeout set on the coordinator does not bound a
// wait on a worker, so the record statement cannot set it as on one
// server; with citus.propagate_set_commands = 'local', Citus sends the SET
// LOCAL statements that follow to the workers in the transaction, and to
// those it joins later (the record's own). Both end with the transaction,
// or with a rollback to the savepoint; after RELEASE they stay, so
// AtomicInTx puts the caller's back (CitusPutBack).
func CitusClaimWait(claimWait string) []string {
	return []string{
		"SET LOCAL citus.propagate_set_commands = 'local'",
		"SET LOCAL lock_timeout = " + literal(claimWait),
	}
}

// CitusSettingsSQL reads the settings CitusClaimWait changes: lock_timeout
// and citus.propagate_set_commands.
const CitusSettingsSQL = `SELECT current_setting('lock_timeout'), current_setting('citus.propagate_set_commands')`

// CitusPutBack returns the statements that put back the settings
// CitusClaimWait changed, as CitusSettingsSQL read them, on the
// coordinator and the workers.
func CitusPutBack(lockTimeout, propagate string) string {
	return "SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL lock_timeout = " + literal(lockTimeout) +
		"; SET LOCAL citus.propagate_set_commands = " + literal(propagate)
}
