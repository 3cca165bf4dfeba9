package idemtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestMeetingHoldsUntilABlockedTwin: the first claim is held until the other
// attempt is blocked in PostgreSQL on the claim's row lock (atomic mode), and
// only then released; the twin is still blocked when it is.
func TestMeetingHoldsUntilABlockedTwin(t *testing.T) {
	db := idemtest.New(t)
	ctx := t.Context()
	_, err := db.Pool.Exec(ctx, `CREATE TABLE claims (key text PRIMARY KEY)`)
	require.NoError(t, err)

	first, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(context.WithoutCancel(ctx)) }()
	_, err = first.Exec(ctx, `INSERT INTO claims VALUES ('k')`)
	require.NoError(t, err)

	// The first claim is held before the twin exists; it may be released
	// only once the twin is blocked on the row lock.
	m := idemtest.NewMeeting(db, 2)
	held := make(chan struct{})
	go func() {
		m.Claimed(ctx)
		close(held)
	}()
	twin := make(chan error, 1)
	go func() {
		_, err := db.Pool.Exec(ctx, `INSERT INTO claims VALUES ('k')`) // blocks on the first's row
		twin <- err
	}()
	<-held

	select {
	case err := <-twin:
		t.Fatalf("the twin finished (%v) while the first claim was still open", err)
	default:
	}
	met, others := m.Met()
	assert.Equal(t, 1, met, "attempts that met the claim")
	assert.Equal(t, 1, others)

	require.NoError(t, first.Commit(ctx))
	var pgErr *pgconn.PgError
	require.True(t, errors.As(<-twin, &pgErr), "the twin must fail on the unique index once the first commits")
	assert.Equal(t, "23505", pgErr.Code)
}

// TestMeetingCountsEachWaitedCallerOnce: Waited counts attempts by their
// Caller index, each once, and ignores a context without one; a hold that
// ends before everyone met reports how many did.
func TestMeetingCountsEachWaitedCallerOnce(t *testing.T) {
	db := idemtest.New(t)
	m := idemtest.NewMeeting(db, 3)
	m.Waited(idemtest.Caller(t.Context(), 1))
	m.Waited(idemtest.Caller(t.Context(), 1))
	m.Waited(t.Context()) // not a marked attempt

	ended, cancel := context.WithCancel(t.Context())
	cancel() // the hold ends at once: Met reports the count so far
	m.Claimed(ended)
	met, others := m.Met()
	assert.Equal(t, 1, met, "caller 1 was told twice, no other caller was")
	assert.Equal(t, 2, others)
}

// TestMeetingReleasesWhenEveryAttemptClaimed: a broken runtime lets every
// attempt claim the key; the hold then ends instead of waiting for a meeting
// that cannot happen, and later claims pass straight through.
func TestMeetingReleasesWhenEveryAttemptClaimed(t *testing.T) {
	db := idemtest.New(t)
	m := idemtest.NewMeeting(db, 2)
	held := make(chan struct{})
	go func() {
		m.Claimed(t.Context())
		close(held)
	}()
	m.Claimed(t.Context()) // the second claim: not held
	<-held                 // and it ends the first's hold
	met, others := m.Met()
	assert.Equal(t, 0, met)
	assert.Equal(t, 1, others)
}

// TestMeetingReleasesWhenOthersWaited: in external mode the others meet the
// claim by being told the key is in progress; the hold ends when all have.
func TestMeetingReleasesWhenOthersWaited(t *testing.T) {
	db := idemtest.New(t)
	m := idemtest.NewMeeting(db, 3)
	held := make(chan struct{})
	go func() {
		m.Claimed(t.Context())
		close(held)
	}()
	m.Waited(idemtest.Caller(t.Context(), 1))
	m.Waited(idemtest.Caller(t.Context(), 2))
	<-held
	met, others := m.Met()
	assert.Equal(t, 2, met)
	assert.Equal(t, 2, others)
}
