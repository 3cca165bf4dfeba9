package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// A ledger (or an inline table) distributed on Citus is swept per shard:
// the sweep's statement names no scope, so through the coordinator it
// would be a multi-shard statement holding locks on every shard at once
// (and Citus refuses its FOR UPDATE SKIP LOCKED subquery). Instead the
// store reads the table's shards from Citus's catalog and runs the same
// batch statement on each shard's table, on the worker holding it, through
// the coordinator (master_run_on_worker, which run_command_on_shards is
// built on): one short single-shard statement per batch, paced per shard
// by the sweep share as on one server. A table that is not hash-distributed
// (plain PostgreSQL, a Citus local or reference table) is swept as one.

// citusShard is one shard of a hash-distributed table and the node that
// holds its placement.
type citusShard struct {
	ID   int64  `json:"id"`
	Name string `json:"name"` // schema-qualified, quoted where needed by the server (shard_name)
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Placements counts the shard's copies: one, or the per-shard sweep
	// would clear only one of them.
	Placements int `json:"placements"`
}

// citusShards returns the shards of table (quoted) when it is a
// hash-distributed Citus table, nil when it is not (plain PostgreSQL, or a
// table Citus does not shard by hash). They are read at every sweep, so a
// rebalanced cluster is swept where its shards now are.
func (s *Store) citusShards(ctx context.Context, table string) ([]citusShard, error) {
	var citus bool
	if err := s.exec.QueryRow(ctx, ledger.CitusCatalogSQL).Scan(&citus); err != nil {
		return nil, fmt.Errorf("look for Citus's catalog: %w", err)
	}
	if !citus {
		return nil, nil
	}
	var list string
	if err := s.exec.QueryRow(ctx, ledger.CitusShardsSQL, table).Scan(&list); err != nil {
		return nil, fmt.Errorf("read the shards of %s: %w", table, err)
	}
	var shards []citusShard
	if err := json.Unmarshal([]byte(list), &shards); err != nil {
		return nil, fmt.Errorf("read the shards of %s: %w", table, err)
	}
	for _, sh := range shards {
		if sh.Placements != 1 {
			return nil, fmt.Errorf("shard %d of %s has %d placements: a per-shard sweep clears one placement only, so it sweeps tables with one placement per shard (citus.shard_replication_factor = 1)", sh.ID, table, sh.Placements)
		}
	}
	return shards, nil
}

// onShard runs one batch statement on shard sh's node and returns the
// rows its command tag counts ("DELETE 1000", "UPDATE 7").
func (s *Store) onShard(ctx context.Context, sh citusShard, command string) (int64, error) {
	var ok bool
	var result string
	if err := s.exec.QueryRow(ctx, ledger.CitusOnShardSQL, sh.Host, sh.Port, command).Scan(&ok, &result); err != nil {
		return 0, fmt.Errorf("shard %d on %s:%d: %w", sh.ID, sh.Host, sh.Port, err)
	}
	if !ok {
		return 0, fmt.Errorf("shard %d on %s:%d: %s", sh.ID, sh.Host, sh.Port, result)
	}
	fields := strings.Fields(result)
	if len(fields) == 0 {
		return 0, fmt.Errorf("shard %d on %s:%d: no command tag", sh.ID, sh.Host, sh.Port)
	}
	n, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("shard %d on %s:%d: command tag %q: %w", sh.ID, sh.Host, sh.Port, result, err)
	}
	return n, nil
}

// sweepShards sweeps every shard in turn, each in batches paced like a
// sweep on one server (sweepBatches); statement renders one batch on a
// shard's table. A shard that fails does not stop the others; the errors
// are joined.
func (s *Store) sweepShards(ctx context.Context, shards []citusShard, batch int, statement func(shard string, batch int) string, ev Event, what string) (int64, error) {
	var total int64
	var errs []error
	for _, sh := range shards {
		n, err := s.sweepBatches(ctx, batch, func(batch int) (int64, error) {
			n, err := s.onShard(ctx, sh, statement(sh.Name, batch))
			if err != nil {
				return 0, storeErr(ev.Method, what, err)
			}
			return n, nil
		}, ev)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return total, errors.Join(errs...)
}

// nowLiteral renders the store's clock as the SQL a statement sent without
// parameters uses: the test clock's instant, or now().
func (s *Store) nowLiteral() string {
	t, ok := s.now().(time.Time)
	if !ok {
		return "now()"
	}
	return "'" + t.UTC().Format("2006-01-02 15:04:05.999999") + "+00'::timestamptz"
}

// What the store knows of its server (Store.citus).
const (
	citusUnknown int32 = iota
	citusNo
	citusYes
)

// onCitus reports whether the store's server runs Citus, which needs
// other forms of two statements (ledger.Statements.RecordCitus and
// MismatchCitus). It asks on q once per store, on its first atomic call
// (or mismatch record): one statement, before the lookup. A Citus coordinator whose ledger is not
// distributed gets the Citus forms too, which hold there as well.
func (s *Store) onCitus(ctx context.Context, q stmts) (bool, error) {
	switch s.citus.Load() {
	case citusYes:
		return true, nil
	case citusNo:
		return false, nil
	}
	var yes bool
	if err := q.QueryRow(ctx, ledger.CitusLoadedSQL).Scan(&yes); err != nil {
		return false, fmt.Errorf("ask whether the server runs Citus: %w", err)
	}
	if yes {
		s.citus.Store(citusYes)
	} else {
		s.citus.Store(citusNo)
	}
	return yes, nil
}

// citusClaimWait is the prelude of the record on Citus: the store's claim
// wait as transaction-local SET LOCAL statements (ledger.CitusClaimWait).
func (s *Store) citusClaimWait() []string { return ledger.CitusClaimWait(s.claimWaitSetting()) }

// citusPutBack reads, in the caller's transaction q, the settings
// citusClaimWait changes, and returns the statements that put them back,
// on the coordinator and the workers: sent after RELEASE
// (ledger.CitusPutBack).
func citusPutBack(ctx context.Context, q stmts) (string, error) {
	var lockTimeout, propagate string
	if err := q.QueryRow(ctx, ledger.CitusSettingsSQL).Scan(&lockTimeout, &propagate); err != nil {
		return "", err
	}
	return ledger.CitusPutBack(lockTimeout, propagate), nil
}
