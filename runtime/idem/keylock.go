package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// The key's lock: what bounds a twin's wait in atomic mode.
//
// Twins (calls under one scope, method and key at once) queue on a
// transaction-scoped advisory lock on the key before their bodies run: the
// lock statement is the first of the body's transaction, queued behind
// BEGIN (or the savepoint) and sent with the body's first statement on
// pgx, so it costs no round trip. The first call holds it until its
// transaction ends, whatever else its body holds (a business row, an
// index entry) and its ledger row with it. A twin waits for it at most the
// claim wait (a transaction-local lock_timeout around the lock alone, the
// setting in force put back after it), then gets an *InProgressError; one
// that gets it once the first committed runs its body and its record is
// refused by the first's row, which answers it (a replay); once the first
// rolled back, it runs as if it were first. Twins therefore run their
// bodies one at a time, and never deadlock on the rows they share.

// The lock statement is ledger.KeyLockSQL: it takes the advisory lock
// keyLockID for the rest of the transaction, waiting for it at most the
// claim wait.

// keyLockID is the advisory lock of c's key: the first 8 bytes of SHA-256
// over its scope, method and key, each preceded by its length. Two keys
// that share it (1 in 2^64 for a pair) queue behind each other: a twin's
// wait, never a wrong answer.
func keyLockID(c call) int64 {
	h := sha256.New()
	for _, part := range []string{c.scope, c.method, c.key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// keyLockArgs are the lock statement's arguments for c (nil: the store
// takes no key lock, noKeyLock).
func (s *Store) keyLockArgs(c call) []any {
	if s.cfg.noKeyLock {
		return nil
	}
	return []any{keyLockID(c), s.claimWaitSetting()}
}

// keyWait records whether the key's lock statement waited out the claim
// wait: a twin held the key for longer. An attempt's transports carry one;
// the statement's failure may reach the body first, which returns it (or
// not) as it likes.
type keyWait struct{ ended atomic.Bool }

// keyLockStmt is the lock statement for c as a pending statement whose
// failure is recorded in w (none with noKeyLock).
func (s *Store) keyLockStmt(c call, w *keyWait) []pendingStmt {
	args := s.keyLockArgs(c)
	if args == nil {
		return nil
	}
	return []pendingStmt{{sql: ledger.KeyLockSQL, args: args, failed: w.failed}}
}

// failed records the lock statement's error err.
func (w *keyWait) failed(err error) {
	if isLockTimeout(err) {
		w.ended.Store(true)
	}
}

// keyWaitEnded reports whether the key's lock statement waited out the
// claim wait.
func (w *keyWait) keyWaitEnded() bool { return w.ended.Load() }
