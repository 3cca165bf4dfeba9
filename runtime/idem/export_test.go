package idem

// UseClaimStatement makes s send sql as its atomic claim statement (its
// arguments as claimNew's, its columns as heldRow's): the rolling-upgrade
// test runs the statement an earlier runtime sent beside today's, on one
// ledger.
func UseClaimStatement(s *Store, sql string) { s.q.claimNew = sql }

// WaitMismatchRecords waits for the mismatches s records after the answer
// (AtomicInTx) to be written.
func WaitMismatchRecords(s *Store) { s.records.Wait() }
