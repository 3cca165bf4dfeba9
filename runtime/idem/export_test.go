package idem

// WaitMismatchRecords waits for the mismatches s records after the answer
// (AtomicInTx) to be written.
func WaitMismatchRecords(s *Store) { s.records.Wait() }
