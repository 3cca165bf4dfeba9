package ledger

import "fmt"

// The test harness's statements (runtime/idemtest): what its scenarios
// read or change in a ledger or an inline table to check what calls left
// there. Nothing else sends them.

// HarnessStatements are the test harness's statements on one ledger table.
type HarnessStatements struct {
	// MismatchRecord reads the last mismatch recorded on the row of method
	// $1 and key $2: mismatch_at, mismatch_fingerprint.
	MismatchRecord string
	// Rows counts the rows of method $1.
	Rows string
}

// HarnessStatements returns the test harness's statements on the ledger.
func (l Schema) HarnessStatements() HarnessStatements {
	t := l.Table.Quoted()
	return HarnessStatements{
		MismatchRecord: "SELECT mismatch_at, mismatch_fingerprint FROM " + t + " WHERE method = $1 AND key = $2",
		Rows:           "SELECT count(*) FROM " + t + " WHERE method = $1",
	}
}

// InlineHarnessStatements are the test harness's statements on one inline
// table.
type InlineHarnessStatements struct {
	// Rows counts the table's rows; KeyedRows those carrying key $1.
	Rows, KeyedRows string
	// Age moves the claimed-at time of the row carrying key $2 back by $1
	// µs: the key's retention runs out without a wait.
	Age string
}

// HarnessStatements returns the test harness's statements on the inline
// table.
func (s Inline) HarnessStatements() InlineHarnessStatements {
	t, key, at := s.Table.Quoted(), Quote(InlineKeyColumn), Quote(InlineClaimedAtColumn)
	return InlineHarnessStatements{
		Rows:      "SELECT count(*) FROM " + t,
		KeyedRows: "SELECT count(*) FROM " + t + " WHERE " + key + " = $1",
		Age:       fmt.Sprintf("UPDATE %s SET %s = %s - $1::bigint * interval '1 microsecond' WHERE %s = $2", t, at, at, key),
	}
}
