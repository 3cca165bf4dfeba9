// Package mutation proves that the generated twin-request tests earn their
// place: each test here breaks one guarantee of runtime/idem in a copy of its
// source, runs the generated tests of the example package against the broken
// runtime with go test -overlay, and asserts that named generated tests fail.
// The repository's sources are never touched.
package mutation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// envChild marks the go test processes this package starts. They run only
// the example package, so this package never runs inside itself; the marker
// makes that explicit should a child ever be pointed at ./... .
const envChild = "IDEMGEN_MUTATION_CHILD"

// target is the package whose generated tests are run, and runPattern picks
// the generated tests (TestIdempotent<Type><Method>) out of it, leaving the
// example's own slower end-to-end test out.
const (
	target     = "./example/"
	runPattern = "^TestIdempotent"
)

// edit replaces text in one file of runtime/idem (or, as ../idemtest/…,
// of the test harness that applies the package's migrations: a migration
// idemgen wrote without its unique index is mutated there). old must occur
// exactly once, so a refactor of the runtime fails the test instead of
// silently testing an unmutated copy.
type edit struct {
	file     string // file name in runtime/idem, or ../idemtest/…
	old, new string
}

// mutation is one realistic bug that breaks a guarantee.
type mutation struct {
	name  string
	bug   string // what a developer would have written, in one sentence
	edits []edit
	// caught maps each generated subtest that must fail under the mutation
	// to what its failure must show: the assertion that says why it failed,
	// not just that something did. Only these subtests are run (pattern),
	// so each must fail on every run: none may depend on concurrent
	// requests happening to overlap (the twins meet deterministically,
	// idemtest.Meeting).
	caught map[string]*regexp.Regexp
	// cluster runs the mutant's generated tests on a Citus cluster
	// (IDEMGEN_TEST_CITUS=2): the bug breaks a path only Citus takes. The
	// control runs them on one server; the README's test command runs them
	// unmutated on a cluster too (./example on a Citus cluster).
	cluster bool
}

// Failure messages of the generated tests (example/idem_gen_test.go).
var (
	// More than one atomic call answered on its own for one key: more than
	// one run's work committed.
	freshTwiceOrMore = regexp.MustCompile(`([2-9]|\d\d+) of \d+ calls got an answer of their own, not a replay, want 1`)
	// A call whose twin recorded the key during its body did not answer
	// with the twin's response.
	twinNotReplayed = regexp.MustCompile(`a call whose twin recorded the key during its body(: got error| answered on its own, want a replay)`)
	// Another request under the key ran instead of being refused (with
	// whatever the body then answered).
	notRefused = regexp.MustCompile(`same key, different request: got error .+, want idem\.ErrMismatch`)
	// An effect left in the caller's transaction by a failed body.
	effectLeftInTx = regexp.MustCompile(`the method's effects grew by 1, want 0`)
	// More than one execution for one key.
	ranTwiceOrMore = regexp.MustCompile(`the method body ran ([2-9]|\d\d+) times, want 1`)
	ranTwice       = regexp.MustCompile(`the method body ran 2 times, want 1`)
	// A replay after a takeover ran the body again.
	ranThrice = regexp.MustCompile(`the method body ran 3 times, want 2`)
	// More than one ledger row for one key.
	rowsTwoOrMore = regexp.MustCompile(`the ledger holds ([2-9]|\d\d+) rows for \S*Payments\.\w+, want 1`)
	// Another request's stored response was replayed, without an error.
	replayedOther = regexp.MustCompile(`same key, different request: got error <nil>, want idem\.ErrMismatch`)
	// A claim hit the unique index and failed instead of replaying.
	duplicateKey = regexp.MustCompile(`duplicate key value violates unique constraint "idempotency_keys_pkey"`)
	// An expired key's retry was refused on every attempt: its record
	// met the expired row, which no lookup answers from.
	expiredRefused = regexp.MustCompile(`the same key after its retention \(key "expiring".*ledger row vanished between claim and read`)
	// A retry ran while the crashed attempt held the key.
	notInProgress = regexp.MustCompile(`retry while the crashed attempt holds the key: got error <nil>, want idem\.ErrInProgress`)
	// A second scope's request was answered from the first scope's row.
	scopesShared = regexp.MustCompile(`the method body ran 1 times, want 2`)
	// A retry inside the method's retention ran the body again.
	expiredEarly = regexp.MustCompile(`the method body ran 2 times, want 1`)
	// A replay differs from the first answer.
	replayDiffers = regexp.MustCompile(`a replay must equal the original`)
	// A replay failed (nothing stored to decode).
	replayFailed = regexp.MustCompile(`call [01] of 2 failed: idem: \S*Payments\.\w+: decode stored response`)
	// An attempt whose lock was taken over finished anyway.
	zombieFinished = regexp.MustCompile(`the attempt that outlived its lock finished with error <nil>, want idem\.ErrLockLost`)
	// A declared final error was not stored: the retry ran the method.
	finalNotStored = regexp.MustCompile(`retry after the final error: got error <nil>, want Err\w+ replayed`)
	// An attempt whose row was swept and claimed anew finished anyway.
	staleFinished = regexp.MustCompile(`the stale attempt finished after a sweep with error <nil>, want idem\.ErrLockLost`)
	// A new request under a reused key got the old request's downstream key.
	downstreamReused = regexp.MustCompile(`DownstreamKey is "idem-[0-9a-f]+" before and after the retention`)
	// A new request under a reused key was answered downstream by the old one.
	effectsOnce = regexp.MustCompile(`the method's effects grew by 1, want 2`)
	// A twin of a call holding the key was not told the key is in
	// progress (it ran, failed, or waited out its own deadline).
	twinNotInProgress = regexp.MustCompile(`a twin of a call holding the key: got error .+, want an \*idem\.InProgressError`)
	// A twin of a call holding the key did not queue on the key's lock.
	twinNotQueued = regexp.MustCompile(`a twin of a call holding the key (answered at once|waits on a row the call holds), want it queued on the key's lock`)
	// A body ran under the claim wait's lock_timeout.
	bodyLockTimeout = regexp.MustCompile(`the body runs with lock_timeout \S+, not the session's`)
	// A sweep deleted a row whose retention had not ended.
	sweptLive = regexp.MustCompile(`a sweep inside the key's retention deleted 1 rows`)
	// A mismatch refused in the caller's transaction left no record once
	// the caller rolled back.
	mismatchNotKept = regexp.MustCompile(`a mismatch refused in the caller's transaction, which then rolled back: the ledger row of key "in-tx-mismatch" holds mismatch_at <nil>`)
)

// Failure messages of the inline-mode scenarios (runtime/idemtest/suite_inline.go).
var (
	// Two rows under one key: counted by the test, or refused by the
	// runtime's own check sent with COMMIT (it wants exactly one row).
	inlineTwoRows      = regexp.MustCompile(`"payments" holds ([2-9]|\d\d+) rows with key "(twins|storm)", want 1|inline method did not write its idempotency key: no row of payments holds key "(twins|storm)"`)
	inlineScopesShared = regexp.MustCompile(`"payments" holds \d+ rows, want \d+: each request writes its row`)
	inlineNotFreed     = regexp.MustCompile(`"payments" holds \d+ rows, want \d+: both requests' rows stay`)
	inlineFreedEarly   = regexp.MustCompile(`"payments" holds \d+ rows, want \d+: a retry inside the retention replays the row`)
	inlineSweptLive    = regexp.MustCompile(`sweep: cleared 2 keys \(err <nil>\), want 1: the expired one, not the live one`)
	inlineForgot       = regexp.MustCompile(`a body that forgets its key: got error <nil>, want idem\.ErrKeyNotWritten`)
	inlineRowKept      = regexp.MustCompile(`"payments" holds \d+ rows, want \d+: the failed body's row must roll back`)
	inlineNotJanitored = regexp.MustCompile(`the store's janitor cleared 0 keys \(err <nil>\), want 1`)
	inlineTxAborted    = regexp.MustCompile(`retry in the same transaction: .*current transaction is aborted`)
)

// The unique index: the primary key written by CREATE TABLE (ledger/ledger.go).
var primaryKey = edit{"ledger/ledger.go",
	"\tfor _, c := range l.Columns {\n" +
		"\t\tfmt.Fprintf(&b, \"    %s,\\n\", c.Def())\n" +
		"\t}\n" +
		"\tfmt.Fprintf(&b, \"    CONSTRAINT %s PRIMARY KEY (%s)\\n)\", Quote(l.PrimaryKeyName()), quoteList(l.Key))\n",
	"\tfor i, c := range l.Columns {\n" +
		"\t\tif i > 0 {\n" +
		"\t\t\tb.WriteString(\",\\n\")\n" +
		"\t\t}\n" +
		"\t\tb.WriteString(\"    \" + c.Def())\n" +
		"\t}\n" +
		"\tb.WriteString(\"\\n)\")\n",
}

// applyMigration is the line of the test harness (runtime/idemtest) that
// reads each migration file before applying it; the mutations that break a
// generated migration edit the text there.
const applyMigration = "up, err := s.format.Up(string(f.data))"

// withoutInMigrations makes the harness apply every migration with old
// replaced by new, as if idemgen had written that.
func withoutInMigrations(old, new string) edit {
	return edit{"../idemtest/migrate.go", applyMigration,
		fmt.Sprintf("up, err := s.format.Up(strings.Replace(string(f.data), %q, %q, 1))", old, new)}
}

// The files of runtime/idem/ledger that hold the runtime's statements: the
// ledger's (per mode and clock, with their Citus forms, and the key's lock)
// and inline mode's.
const (
	statementsFile       = "ledger/statements.go"
	inlineStatementsFile = "ledger/inline.go"
)

// The atomic record's conflict clause (statementsFile), in its takeover form:
// an expired row whose fence the lookup saw is taken over, and any other
// row refuses the record. Its fresh form, for a key the lookup found no
// row for, is the same INSERT without it (recordForms).
const recordConflict = "\n    ON CONFLICT (scope, method, key) DO UPDATE\n" +
	"    SET fingerprint = excluded.fingerprint, status = 'done', response = excluded.response,\n" +
	"        error_name = excluded.error_name, error_message = excluded.error_message, steps = '{}',\n" +
	"        fence = excluded.fence / (%[5]s AND t.fence = $9)::int,\n" +
	"        created_at = excluded.created_at, expires_at = excluded.expires_at,\n" +
	"        locked_until = NULL, intention = excluded.intention`"

// The atomic record's condition on the row it conflicts with, and its
// guard (statementsFile): a row that may not be taken over divides the fence
// by zero, so the pipelined COMMIT rolls the work back.
const recordWhere = "        fence = excluded.fence / (%[5]s AND t.fence = $9)::int,\n"

// The end of the atomic record's conflict clause (statementsFile).
const recordEnd = "        locked_until = NULL, intention = excluded.intention`"

// Which form of the record Atomic sends (atomic.go): the fresh one (a
// plain INSERT) when its lookup found no row.
const recordFresh = "\tfresh := seen == 0 && !inTx\n"

// The record's two forms on Citus (statementsFile).
const recordCitusForms = "\tq.RecordCitus = recordForms(table, now, \"VALUES (\", \")\", reclaimable)\n"

// The fresh form of the record, made from the takeover form (statementsFile).
const recordFreshForm = "\treturn RecordForms{Fresh: withoutParam(fresh, 9), Takeover: takeover}\n"

// The lookup after an atomic attempt lost (atomic.go): a twin's row
// answers, whatever made the attempt lose.
// The key's lock statement (statementsFile): its try, its claim
// wait, the setting it puts back; and lost's answer to a wait that ran out.
const (
	keyLockTry       = "SELECT pg_try_advisory_xact_lock($1::bigint) AS free"
	keyLockClaimWait = "set_config('lock_timeout', $2, true)"
	keyLockPutBack   = "SELECT set_config('lock_timeout', saved.lock_timeout, true) FROM saved, locked"
	lostKeyWait      = "\tcase t.keyWaitEnded():\n"
)

const lostLookup = "if rerr == nil && answers(r, found) {"

// The external claim's conflict clause (statementsFile).
const externalConflict = "ON CONFLICT (scope, method, key) DO UPDATE\n" +
	"SET status = 'in_progress', fence = t.fence + 1, locked_until = excluded.locked_until,\n" +
	"    fingerprint = excluded.fingerprint, response = NULL, error_name = NULL, error_message = NULL,\n" +
	"    steps = CASE WHEN %[3]s THEN '{}'::jsonb ELSE t.steps END,\n" +
	"    created_at = CASE WHEN %[3]s THEN excluded.created_at ELSE t.created_at END,\n" +
	"    expires_at = greatest(CASE WHEN %[3]s THEN excluded.expires_at ELSE t.expires_at END, excluded.locked_until),\n" +
	"    intention = CASE WHEN %[3]s THEN excluded.intention ELSE t.intention END\n" +
	"WHERE %[3]s\n" +
	"   OR (t.status = 'in_progress' AND t.fingerprint = excluded.fingerprint AND t.locked_until <= excluded.created_at)\n" +
	"RETURNING fence, steps, intention, t.fence > 1 AS taken_over`"

// The fingerprint comparison in settle (settle.go).
const fingerprintCheck = "\tif string(r.fingerprint) != string(c.fp) {\n" +
	"\t\ts.hook(ctx, s.cfg.hooks.Mismatch, c.event())\n" +
	"\t\ts.cfg.logger.WarnContext(ctx, \"idempotency key reused with a different request\",\n" +
	"\t\t\t\"method\", c.method, \"scope\", c.scope, \"key\", c.key,\n" +
	"\t\t\t\"stored\", shortHex(r.fingerprint), \"got\", shortHex(c.fp))\n" +
	"\t\treturn zero, &MismatchError{Method: c.method, Key: c.key, Stored: r.fingerprint, Got: c.fp}\n" +
	"\t}\n"

// The lookup's decision (atomic.go): a row that has not expired answers.
const lookupAnswers = "\treturn found && !r.expired\n"

// mutations are the broken guarantees the generated tests must catch. Each is
// a bug a developer could write, made from the runtime's real source text.
func mutations() []mutation {
	return append(append(append(coreMutations(), promiseMutations()...), inlineMutations()...), hintMutations()...)
}

// Failure messages of the scenarios of a retry the caller did not mark
// (runtime/idemtest/suite_hint.go).
var (
	// An unmarked retry answered on its own: its refused record was not
	// looked up.
	unmarkedNotReplayed = regexp.MustCompile(`a retry without the mark answered on its own, want a replay of the first answer`)
	// A first attempt looked its key up: the unmarked retry's body did not
	// run (or the expired key's refused run did not happen).
	firstLookedUp = regexp.MustCompile(`the method body ran (1 times, want 2|2 times, want 3)`)
	// An expired key's unmarked call was refused on every attempt.
	expiredUnmarkedRefused = regexp.MustCompile(`the same key after its retention, without the mark \(key "expiring-unmarked".*ledger row vanished between claim and read`)
	// A storm of unmarked retries never turned to lookups first.
	stormNotAdapted = regexp.MustCompile(`the last 10 retries of a storm without the mark ran 10 bodies, want 0`)
)

// Whether an atomic call looks its key up first (hint.go, atomic.go).
const (
	lookupFirstRule  = "\treturn s.cfg.lookupFirst || RetryFrom(ctx) || s.replays.likely(c.method)\n"
	recordRefused    = "\t\tif definite(err) {\n\t\t\ts.replays.observe(c.method, errors.Is(err, errRecordRefused))\n"
	expiredFallback  = "\t\tif !lookup && errors.Is(err, errRowVanished) {\n"
	laterAttempts    = "\t\tlookup = true\n"
	replayRateTarget = "\tif replay {\n\t\ttarget = replayRateOne\n\t}\n"
)

// hintMutations break, one at a time, the rule that a first attempt does
// not look its key up and a call that may be a retry does: the answer
// must never depend on it.
func hintMutations() []mutation {
	return []mutation{
		{
			name: "ha_refused_record_answered_as_success",
			bug: "a record refused by the key's row (a call that skipped the lookup) is taken for success: the caller " +
				"gets the body's answer, whose work rolled back, instead of the row's",
			edits: []edit{
				{"atomic.go", recordRefused, "\t\tif errors.Is(err, errRecordRefused) {\n\t\t\treturn out, berr\n\t\t}\n" + recordRefused},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/retry_without_the_mark": unmarkedNotReplayed,
				"TestIdempotentPaymentsRefund/retry_without_the_mark": unmarkedNotReplayed,
			},
		},
		{
			name: "hb_retry_mark_ignored",
			bug:  "idem.ContextWithRetry is ignored: a marked retry runs its body before the key's row answers it",
			edits: []edit{
				{"hint.go", lookupFirstRule, "\treturn s.cfg.lookupFirst || s.replays.likely(c.method)\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/retry_with_the_mark": ranTwice,
				"TestIdempotentPaymentsRefund/retry_with_the_mark": ranTwice,
			},
		},
		{
			name: "hc_every_call_looks_up_first",
			bug:  "the hint is read the wrong way round: every call is taken for a retry and looks its key up first",
			edits: []edit{
				{"hint.go", lookupFirstRule, "\treturn true\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/retry_without_the_mark":       firstLookedUp,
				"TestIdempotentPaymentsRefund/retry_without_the_mark":       firstLookedUp,
				"TestIdempotentPaymentsCharge/expired_key_without_the_mark": firstLookedUp,
				"TestIdempotentPaymentsRefund/expired_key_without_the_mark": firstLookedUp,
			},
		},
		{
			name: "hd_expired_key_never_looked_up",
			bug: "an attempt after a refused record skips the lookup again: an expired row refuses every fresh record, " +
				"and no attempt takes it over",
			edits: []edit{
				{"atomic.go", expiredFallback, "\t\tif false && errors.Is(err, errRowVanished) {\n"},
				{"atomic.go", laterAttempts, ""},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/expired_key_without_the_mark": expiredUnmarkedRefused,
				"TestIdempotentPaymentsRefund/expired_key_without_the_mark": expiredUnmarkedRefused,
			},
		},
		{
			name: "he_replays_not_counted",
			bug:  "a refused record or an answering lookup is not counted as a replay: a storm of unmarked retries never turns to lookups first",
			edits: []edit{
				{"hint.go", replayRateTarget, ""},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/retry_storm_without_the_mark": stormNotAdapted,
				"TestIdempotentPaymentsRefund/retry_storm_without_the_mark": stormNotAdapted,
			},
		},
	}
}

// promiseMutations break, one at a time, each promise the generated doc
// comments state beyond the claim itself.
func promiseMutations() []mutation {
	return []mutation{
		{
			name: "e_scope_ignored",
			bug:  "the scope is not read from the context: every tenant shares one key space",
			edits: []edit{
				{"call.go", "return call{scope: scope, method: method", "return call{scope: \"\", method: method"},
			},
			caught: map[string]*regexp.Regexp{
				// Atomic: the second scope's call, a first attempt, runs
				// its body, whose record the first scope's row refuses:
				// it replays, and its effect rolls back.
				"TestIdempotentPaymentsCharge/same_key,_two_scopes":  effectsOnce,
				"TestIdempotentPaymentsRefund/same_key,_two_scopes":  effectsOnce,
				"TestIdempotentPaymentsPayout/same_key,_two_scopes":  scopesShared,
				"TestIdempotentPaymentsDeposit/same_key,_two_scopes": inlineScopesShared,
			},
		},
		{
			name: "f_retention_ignored",
			bug:  "the method's -retention is ignored in favour of the store's default (24h, shorter than the example's 48h)",
			edits: []edit{
				{"call.go", "\tif m.Retention > 0 {\n\t\treturn m.Retention\n\t}\n\treturn s.cfg.retention\n", "\treturn s.cfg.retention\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/expired_key":           (expiredEarly),
				"TestIdempotentPaymentsRefund/expired_key":           (expiredEarly),
				"TestIdempotentPaymentsPayout/expired_key":           (expiredEarly),
				"TestIdempotentPaymentsCharge/sweep_keeps_live_keys": sweptLive,
				"TestIdempotentPaymentsRefund/sweep_keeps_live_keys": sweptLive,
				"TestIdempotentPaymentsPayout/sweep_keeps_live_keys": sweptLive,
			},
		},
		{
			name: "g_replay_decoded_to_zero",
			bug:  "a replay decodes the stored response into a fresh value but returns the zero value",
			edits: []edit{
				{"settle.go", "\tout, err := decode(m, r.response)\n", "\t_, err := decode(m, r.response)\n\tvar out R\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twins": replayDiffers,
				"TestIdempotentPaymentsCharge/storm": replayDiffers,
				"TestIdempotentPaymentsRefund/twins": replayDiffers,
				"TestIdempotentPaymentsRefund/storm": replayDiffers,
				"TestIdempotentPaymentsPayout/twins": replayDiffers,
				"TestIdempotentPaymentsPayout/storm": replayDiffers,
			},
		},
		{
			name: "h_response_not_written",
			bug:  "the record and finish statements store NULL instead of the encoded response",
			edits: []edit{
				// NULL::bytea || $n is NULL, and still tells PostgreSQL $n's type.
				{statementsFile, "%[3]s$2, $3, $4, $5, 'done', $10,", "%[3]s$2, $3, $4, $5, 'done', NULL::bytea || $10,"},
				{statementsFile, "SET status = 'done', response = $4,", "SET status = 'done', response = NULL::bytea || $4,"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twins": replayFailed,
				"TestIdempotentPaymentsRefund/twins": replayFailed,
				"TestIdempotentPaymentsPayout/twins": replayFailed,
			},
		},
		{
			name: "i_external_lock_ignored",
			bug:  "an external claim takes over an in-progress row whatever its lock",
			edits: []edit{
				{statementsFile, "AND t.fingerprint = excluded.fingerprint AND t.locked_until <= excluded.created_at)", "AND t.fingerprint = excluded.fingerprint)"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsPayout/twins":                         (ranTwice),
				"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover": notInProgress,
			},
		},
		{
			name: "j_fence_not_checked",
			bug:  "an external attempt finalises when its fencing token is not older than the row's (>= instead of =), so a zombie overwrites its takeover",
			edits: []edit{
				{statementsFile, "WHERE %[2]s AND fence = $7 AND intention", "WHERE %[2]s AND fence >= $7 AND intention"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsPayout/attempt_that_outlived_its_lock": zombieFinished,
			},
		},
		{
			name: "j2_mismatch_recorded_in_the_callers_transaction",
			bug:  "AtomicInTx records a refused request's mismatch in the caller's transaction, so the caller's rollback erases it",
			edits: []edit{
				{"atomic.go", "refused := func(r ledgerRow) { s.recordMismatchBehind(ctx, c, r) }", "refused := func(r ledgerRow) { s.recordMismatchOn(ctx, t, c, r) }"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/mismatch_in_the_caller's_transaction,_rolled_back": mismatchNotKept,
				"TestIdempotentPaymentsRefund/mismatch_in_the_caller's_transaction,_rolled_back": mismatchNotKept,
			},
		},
		{
			name: "k_savepoint_missing",
			bug:  "MInTx runs the body and records the key without a savepoint, so a failed body cannot be undone on its own",
			edits: []edit{
				{"pgxdriver.go", "\"SAVEPOINT \"+savepoint, s.keyLockStmt", "\"SELECT 1\", s.keyLockStmt"},
				{"pgxdriver.go", "\"ROLLBACK TO SAVEPOINT \"+savepoint+\"; RELEASE SAVEPOINT \"+savepoint)", "\"SELECT 1\")"},
				{"pgxdriver.go", "\"RELEASE SAVEPOINT \"+savepoint)", "\"SELECT 1\")"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/failing_body_in_the_caller's_transaction": effectLeftInTx,
				"TestIdempotentPaymentsRefund/failing_body_in_the_caller's_transaction": effectLeftInTx,
			},
		},
		{
			name: "l_final_errors_not_stored",
			bug:  "no error is recognised as final: a declined request runs again on retry",
			edits: []edit{
				{"call.go", "\tfor _, f := range m.FinalErrors {\n\t\tif errors.Is(err, f.Err) {", "\tfor _, f := range m.FinalErrors[:0] {\n\t\tif errors.Is(err, f.Err) {"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/final_error_ErrCardDeclined":      (finalNotStored),
				"TestIdempotentPaymentsCharge/final_error_ErrInsufficientFunds": finalNotStored,
				"TestIdempotentPaymentsRefund/final_error_ErrAlreadyRefunded":   (finalNotStored),
				"TestIdempotentPaymentsRefund/final_error_ErrInsufficientFunds": finalNotStored,
				"TestIdempotentPaymentsPayout/final_error_ErrInsufficientFunds": finalNotStored,
			},
		},
		{
			name: "n_intention_not_compared",
			bug: "an external attempt finalises when its fence matches, whatever its intention: after a sweep the key's " +
				"fences start again, so a stale attempt overwrites the new request's answer",
			edits: []edit{
				{statementsFile, "WHERE %[2]s AND fence = $7 AND intention IS NOT DISTINCT FROM $8::uuid AND status",
					"WHERE %[2]s AND fence = $7 AND (intention IS NOT DISTINCT FROM $8::uuid OR $8::uuid IS NOT NULL) AND status"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsPayout/stale_attempt_after_a_sweep": staleFinished,
			},
		},
		{
			name: "o_downstream_key_ignores_intention",
			bug:  "DownstreamKey is derived from scope, method, key and purpose alone: a key reused after its retention sends the old downstream key",
			edits: []edit{
				{"external.go", "\t\tif ex.intention.Valid { // rows claimed", "\t\tif false && ex.intention.Valid { // rows claimed"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsPayout/downstream_key_after_the_retention": downstreamReused,
				"TestIdempotentPaymentsPayout/expired_key":                        effectsOnce,
			},
		},
		{
			name: "m_sweep_deletes_live_rows",
			bug:  "the sweep deletes rows whatever their expiry",
			edits: []edit{
				{statementsFile, "    SELECT scope, method, key FROM %[1]s WHERE expires_at <= %[2]s AND", "    SELECT scope, method, key FROM %[1]s WHERE expires_at <= %[2]s + interval '100 years' AND"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/sweep_keeps_live_keys": sweptLive,
				"TestIdempotentPaymentsRefund/sweep_keeps_live_keys": sweptLive,
				"TestIdempotentPaymentsPayout/sweep_keeps_live_keys": sweptLive,
			},
		},
	}
}

// inlineMutations break, one at a time, each promise of inline mode, where
// the key lives in the business row (Payments.Deposit).
func inlineMutations() []mutation {
	return []mutation{
		{
			name: "p_inline_index_not_unique",
			bug:  "the inline migration builds a plain index on (scope, key): the method's INSERT no longer conflicts, so twins write two rows",
			edits: []edit{withoutInMigrations(`CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "payments_idempotency_key_idx"`,
				`CREATE INDEX CONCURRENTLY IF NOT EXISTS "payments_idempotency_key_idx"`)},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/twins": inlineTwoRows,
				"TestIdempotentPaymentsDeposit/storm": inlineTwoRows,
			},
		},
		{
			name:  "q_inline_fingerprint_not_compared",
			bug:   "a refused inline claim replays the row without comparing its fingerprint with the request's",
			edits: []edit{{"settle.go", "\tif string(stored) != string(c.fp) {", "\tif false && string(stored) != string(c.fp) {"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/same_key,_different_request": replayedOther,
				"TestIdempotentPaymentsDeposit/in_the_caller's_transaction": replayedOther,
			},
		},
		{
			name: "r_inline_expired_key_kept",
			bug:  "an expired inline key is never taken off its old row, so a key reused after its retention replays the old row",
			edits: []edit{
				{inlineStatementsFile, "WHERE %[3]s = $1 AND %[4]s = $2 AND %[5]s <= now()", "WHERE false AND %[3]s = $1 AND %[4]s = $2 AND %[5]s <= now()"},
				{inlineStatementsFile, "WHERE %[3]s = $2 AND %[4]s = $3 AND %[5]s <= $1::timestamptz", "WHERE false AND %[3]s = $2 AND %[4]s = $3 AND %[5]s <= $1::timestamptz"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/expired_key": inlineNotFreed,
			},
		},
		{
			name:  "s_inline_sweep_clears_live_keys",
			bug:   "the inline sweep takes every key off its row, whatever its age",
			edits: []edit{{inlineStatementsFile, "    WHERE %[4]s IS NOT NULL AND %[5]s + %[7]s * interval '1 microsecond' <= %[6]s", "    WHERE %[4]s IS NOT NULL AND %[5]s + %[7]s * interval '0 microsecond' <= %[6]s"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/sweep_keeps_live_keys": inlineSweptLive,
			},
		},
		{
			name:  "t_inline_retention_ignored",
			bug:   "an inline method's -retention is ignored in favour of the store's default (24h, shorter than the example's 48h)",
			edits: []edit{{"inlinemethod.go", "func (m *InlineMethod[R]) retention(s *Store) time.Duration {\n\tif m.Retention > 0 {\n\t\treturn m.Retention\n\t}\n", "func (m *InlineMethod[R]) retention(s *Store) time.Duration {\n"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/expired_key":           inlineFreedEarly,
				"TestIdempotentPaymentsDeposit/sweep_keeps_live_keys": inlineSweptLive,
			},
		},
		{
			name:  "u_inline_key_not_checked",
			bug:   "the check sent with COMMIT accepts a body that wrote no row under its key",
			edits: []edit{{inlineStatementsFile, "SELECT 1 / (count(*) = 1)::int FROM", "SELECT 1 / (count(*) >= 0)::int FROM"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/body_that_forgets_the_key": inlineForgot,
			},
		},
		{
			name: "v_inline_savepoint_missing",
			bug:  "MInTx runs an inline body without a savepoint: a failed body or a refused claim cannot be undone on its own",
			edits: []edit{
				{"inlinepgx.go", `func(context.Context) (pgx.Tx, error) { return tx, nil }, "SAVEPOINT "+sp)`, `func(context.Context) (pgx.Tx, error) { return tx, nil }, "SELECT 1")`},
				{"inlinepgx.go", `tx.Exec(uctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp)`, `tx.Exec(uctx, "SELECT 1")`},
				{"inlinepgx.go", `prefix := []pendingStmt{{sql: "ROLLBACK TO SAVEPOINT " + sp}, {sql: "RELEASE SAVEPOINT " + sp},`, `prefix := []pendingStmt{{sql: "SELECT 1"}, {sql: "SELECT 1"},`},
				{"inlinepgx.go", "\tb.Queue(\"RELEASE SAVEPOINT \" + sp)\n", "\tb.Queue(\"SELECT 1\")\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/in_the_caller's_transaction":              inlineTxAborted,
				"TestIdempotentPaymentsDeposit/failing_body_in_the_caller's_transaction": inlineRowKept,
			},
		},
		{
			name: "x_inline_not_swept_by_the_janitor",
			bug:  "RegisterInline forgets the method: the store's janitor sweeps the ledger but never the inline keys",
			edits: []edit{{"janitor.go", "func RegisterInline[R any](s *Store, m *InlineMethod[R]) {\n",
				"func RegisterInline[R any](s *Store, m *InlineMethod[R]) {\n\tif m != nil {\n\t\treturn\n\t}\n"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/the_store's_janitor_sweeps_it": inlineNotJanitored,
			},
		},
		{
			name: "w_inline_replay_zero",
			bug:  "a refused inline claim looks up the row but returns the zero value",
			edits: []edit{{"settle.go", "\tsetReplayed(ctx, true)\n\ts.hook(ctx, s.cfg.hooks.Replayed, c.event())\n\treturn out, nil\n",
				"\tsetReplayed(ctx, true)\n\ts.hook(ctx, s.cfg.hooks.Replayed, c.event())\n\t_ = out\n\treturn zero, nil\n"}},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsDeposit/twins": replayDiffers,
				"TestIdempotentPaymentsDeposit/storm": replayDiffers,
			},
		},
	}
}

// coreMutations break the claim itself.
func coreMutations() []mutation {
	return []mutation{
		{
			name: "a_no_unique_index",
			bug: "the ledger's primary key is dropped, and the claims become plain INSERTs " +
				"(ON CONFLICT needs a unique index to infer): nothing stops a second row for the same key",
			edits: []edit{
				primaryKey,
				withoutInMigrations(`CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope", "method", "key")`, `CONSTRAINT "idempotency_keys_pkey" CHECK (true)`),
				// The takeover form's clause needs no unique index this
				// way (it then lacks $9, which only an expired key's
				// record sends; the fresh form is unchanged).
				{statementsFile, recordConflict, "\n    ON CONFLICT DO NOTHING`"},
				{statementsFile, externalConflict, "RETURNING fence, steps, intention, t.fence > 1 AS taken_over`"},
			},
			caught: map[string]*regexp.Regexp{
				// Atomic twins each record their own row, and each
				// commits; external twins each claim their own.
				"TestIdempotentPaymentsCharge/twins":                         freshTwiceOrMore,
				"TestIdempotentPaymentsCharge/storm":                         freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/twins":                         freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/storm":                         freshTwiceOrMore,
				"TestIdempotentPaymentsPayout/twins":                         (ranTwice),
				"TestIdempotentPaymentsPayout/storm":                         (ranTwiceOrMore),
				"TestIdempotentPaymentsPayout/expired_key":                   (rowsTwoOrMore),
				"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover": notInProgress,
			},
		},
		{
			name: "b_fingerprint_not_compared",
			bug:  "settle replays the stored response without comparing the stored fingerprint with the request's",
			edits: []edit{
				{"settle.go", fingerprintCheck, ""},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/same_key,_different_request": replayedOther,
				"TestIdempotentPaymentsRefund/same_key,_different_request": replayedOther,
				"TestIdempotentPaymentsPayout/same_key,_different_request": replayedOther,
			},
		},
		{
			name: "c1_claim_always_wins",
			bug: "the record is one upsert, for new keys too, that always wins: a key a twin recorded is recorded again, " +
				"so the insert's conflict no longer decides whose work commits",
			edits: []edit{
				{statementsFile, recordWhere, "        fence = excluded.fence / ($9::bigint >= 0)::int,\n"},
				{"atomic.go", recordFresh, "\tfresh := false\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twins": freshTwiceOrMore,
				"TestIdempotentPaymentsCharge/storm": freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/twins": freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/storm": freshTwiceOrMore,
			},
		},
		{
			name: "c2_plain_insert",
			bug: "the record is always the plain INSERT: an expired key is never taken over, and every attempt " +
				"of its retry is refused by the unique index instead of running",
			edits: []edit{
				{"atomic.go", recordFresh, "\tfresh := !inTx\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/expired_key": expiredRefused,
				"TestIdempotentPaymentsRefund/expired_key": expiredRefused,
			},
		},
		{
			name: "d_response_not_replayed",
			bug: "a done row is treated as absent: the lookup skips it and the record takes it over, " +
				"so the stored response is never replayed and every retry runs the body again",
			edits: []edit{
				{"atomic.go", lookupAnswers, "\treturn found && !r.expired && r.status != StatusDone\n"},
				{statementsFile, recordWhere, "        fence = excluded.fence / ((%[5]s OR t.status = 'done') AND t.fence = $9)::int,\n"},
				{statementsFile, "WHERE %[3]s\n   OR (t.status = 'in_progress'",
					"WHERE %[3]s OR t.status = 'done'\n   OR (t.status = 'in_progress'"},
				// An external claim that lost to a row which is done by the
				// time it reads it claims again instead of replaying.
				{"external.go", "\tif !found || r.expired {\n\t\treturn nil, zero, errRowVanished\n",
					"\tif !found || r.expired || r.status == StatusDone {\n\t\treturn nil, zero, errRowVanished\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twins":                         freshTwiceOrMore,
				"TestIdempotentPaymentsCharge/storm":                         freshTwiceOrMore,
				"TestIdempotentPaymentsCharge/same_key,_different_request":   replayedOther,
				"TestIdempotentPaymentsRefund/twins":                         freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/storm":                         freshTwiceOrMore,
				"TestIdempotentPaymentsRefund/same_key,_different_request":   notRefused,
				"TestIdempotentPaymentsPayout/twins":                         (ranTwice),
				"TestIdempotentPaymentsPayout/storm":                         (ranTwiceOrMore),
				"TestIdempotentPaymentsPayout/same_key,_different_request":   (ranTwice),
				"TestIdempotentPaymentsPayout/crash_mid-work,_then_takeover": ranThrice,
			},
		},
		{
			name: "y1_no_lookup_after_a_lost_record",
			bug: "a record refused by a twin's row is not looked up: the call reports the refusal " +
				"(retried on its own, returned in the caller's transaction) instead of the twin's answer",
			edits: []edit{
				{"atomic.go", lostLookup, "if !recording && rerr == nil && answers(r, found) {"},
			},
			caught: map[string]*regexp.Regexp{
				// An unmarked call's refused record is answered by the
				// second run that AtomicInTx makes, looking up first, when
				// lost reports the refusal: only a marked call, which
				// looked up already, has no second run to hide the bug.
				"TestIdempotentPaymentsCharge/twin_recorded_during_the_body_of_a_marked_retry_in_the_caller's_transaction": twinNotReplayed,
			},
		},
		{
			name: "y2_commit_after_a_refused_record",
			bug: "the record statement does not refuse a record on a row it may not take over: the COMMIT sent with it " +
				"commits the work of a call whose twin recorded the key first",
			edits: []edit{
				// The old guard's bug: a conflict clause whose condition
				// matches no row writes nothing and raises nothing.
				{statementsFile, recordWhere, "        fence = excluded.fence,\n"},
				{statementsFile, recordEnd, "        locked_until = NULL, intention = excluded.intention\n    WHERE %[5]s AND t.fence = $9`"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_took_the_expired_key_over_during_the_body":            twinNotReplayed,
				"TestIdempotentPaymentsRefund/twin_took_the_expired_key_over_during_the_body":            twinNotReplayed,
				"TestIdempotentPaymentsCharge/twin_recorded_during_the_body_in_the_caller's_transaction": twinNotReplayed,
			},
		},
		{
			name: "y4_fresh_record_does_nothing_on_conflict",
			bug: "the fresh record is made safe with ON CONFLICT DO NOTHING: a row a twin committed makes it write " +
				"nothing and raise nothing, and the COMMIT sent with it commits the work",
			edits: []edit{
				{statementsFile, recordFreshForm, "\treturn RecordForms{Fresh: withoutParam(fresh, 9) + \"\\n    ON CONFLICT DO NOTHING\", Takeover: takeover}\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_recorded_during_the_body": twinNotReplayed,
				"TestIdempotentPaymentsRefund/twin_recorded_during_the_body": twinNotReplayed,
			},
		},
		{
			// y4 on Citus alone: the generated tests, run on a cluster,
			// take the Citus record (on one server this changes nothing).
			name: "z_citus_record_does_nothing_on_conflict",
			bug: "on Citus, the fresh record is made safe with ON CONFLICT DO NOTHING: a row a twin committed makes it " +
				"write nothing and raise nothing, and the COMMIT sent with it commits the work",
			edits: []edit{
				{statementsFile, recordCitusForms, recordCitusForms + "\tq.RecordCitus.Fresh += \"\\n    ON CONFLICT DO NOTHING\"\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_recorded_during_the_body": twinNotReplayed,
				"TestIdempotentPaymentsRefund/twin_recorded_during_the_body": twinNotReplayed,
			},
			cluster: true,
		},
		{
			name: "ka_key_lock_dropped",
			bug: "the key's lock is never taken (the try reads as free): a twin of a call holding the key runs its body " +
				"beside it, and waits on whatever the call's work holds, for as long as its context allows",
			edits: []edit{
				{statementsFile, keyLockTry, "SELECT $1::bigint IS NOT NULL AS free"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_of_a_call_holding_the_key":        twinNotInProgress,
				"TestIdempotentPaymentsRefund/twin_of_a_call_holding_the_key":        twinNotInProgress,
				"TestIdempotentPaymentsCharge/twin_queued_behind_a_call_that_failed": twinNotQueued,
			},
		},
		{
			name: "kb_key_lock_without_claim_wait",
			bug: "the key's lock is waited for under the connection's own lock_timeout, not the claim wait: " +
				"a twin of a call holding the key waits for it as long as its context allows",
			edits: []edit{
				{statementsFile, keyLockClaimWait, "set_config('lock_timeout', left($2, 0) || lock_timeout, true)"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_of_a_call_holding_the_key": twinNotInProgress,
			},
		},
		{
			name: "kc_lock_timeout_not_put_back",
			bug: "the lock_timeout the key's lock set (the claim wait) is not put back: " +
				"a twin that waited for the key runs its body under the claim wait, not its connection's setting",
			edits: []edit{
				{statementsFile, keyLockPutBack, "SELECT 1 FROM saved, locked"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_queued_behind_a_call_that_failed": bodyLockTimeout,
				"TestIdempotentPaymentsRefund/twin_queued_behind_a_call_that_failed": bodyLockTimeout,
			},
		},
		{
			name: "kd_key_wait_not_in_progress",
			bug: "a key's lock that waited out the claim wait is not told apart from the body's own error: " +
				"the twin gets the lock timeout (a 500) instead of an in-progress answer (409, ABORTED)",
			edits: []edit{
				{"atomic.go", lostKeyWait, "\tcase false:\n"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/twin_of_a_call_holding_the_key": twinNotInProgress,
				"TestIdempotentPaymentsRefund/twin_of_a_call_holding_the_key": twinNotInProgress,
			},
		},
		{
			name: "y3_body_error_without_lookup",
			bug: "a body error is returned as is: a twin whose work made the body fail (a unique business key, " +
				"a balance) gets the error instead of the first call's answer",
			edits: []edit{
				{"atomic.go", lostLookup, "if recording && rerr == nil && answers(r, found) {"},
			},
			caught: map[string]*regexp.Regexp{
				"TestIdempotentPaymentsCharge/body_error_after_a_twin_recorded": twinNotReplayed,
				"TestIdempotentPaymentsRefund/body_error_after_a_twin_recorded": twinNotReplayed,
			},
		},
	}
}

// packageName is the package of a file of runtime/idem, named relative to it.
func packageName(file string) string {
	if dir := filepath.Dir(file); dir != "." {
		return filepath.Base(dir)
	}
	return "idem"
}

// unchanged is the control: unchanged copies of every file the mutations
// touch, overlaid the same way, so a mutated run differs from the control by
// the mutation's edits alone.
func unchanged(ms []mutation) mutation {
	c := mutation{name: "control"}
	seen := map[string]bool{}
	for _, m := range ms {
		for _, e := range m.edits {
			if !seen[e.file] {
				seen[e.file] = true
				clause := "package " + packageName(e.file) + "\n"
				c.edits = append(c.edits, edit{e.file, clause, clause})
			}
		}
	}
	return c
}

// result is one go test run of the generated tests.
type result struct {
	passed  bool
	ran     []string          // every test and subtest that finished, once per run of it
	failed  []string          // those that failed, once per failure
	output  map[string]string // each test's own output, all its runs
	build   string            // build output and anything not from a test
	elapsed time.Duration
}

// repoRoot returns the module root, two directories above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "module root")
	require.Contains(t, string(mod), "module github.com/idemgen/idemgen\n", "module root")
	return root
}

// pattern is the go test -run pattern that selects the generated subtests
// names (each Test/sub, as go test prints them) and as few others as the
// pattern's form allows: ^(T1|T2)$/^(s1|s2)$ also runs T1/s2 if it exists.
func pattern(names []string) string {
	tests, subs := map[string]bool{}, map[string]bool{}
	for _, n := range names {
		test, sub, _ := strings.Cut(n, "/")
		tests[regexp.QuoteMeta(test)] = true
		subs[regexp.QuoteMeta(sub)] = true
	}
	return "^(" + strings.Join(slices.Sorted(maps.Keys(tests)), "|") + ")$/^(" +
		strings.Join(slices.Sorted(maps.Keys(subs)), "|") + ")$"
}

// slots bound the go test runs of the generated tests that go at once:
// building a test binary keeps a core busy, while running one mostly waits
// on its PostgreSQL, so twice as many runs as builds go side by side.
type slots struct{ build, run chan struct{} }

func newSlots() slots {
	n := runtime.GOMAXPROCS(0)
	return slots{build: make(chan struct{}, n), run: make(chan struct{}, 2*n)}
}

// runGenerated builds the example's test binary into dir (with the overlay
// file, if not empty) and runs the generated tests run selects, parsing
// their events as go test -json reports them (go tool test2json). The
// child builds without -race, without vet and without DWARF (-ldflags=-w:
// stack traces come from the runtime's own tables, which stay; the link of
// each of the many binaries takes half the time): it only has to tell
// passing from failing tests. A build failure is a failed run whose build
// output says why; only a go command that cannot be run at all is an
// error.
func runGenerated(ctx context.Context, s slots, root, dir, overlay, run string, cluster bool) (result, error) {
	start := time.Now()
	r := result{output: map[string]string{}}
	bin := filepath.Join(dir, "example.test")
	args := []string{"test", "-c", "-vet=off", "-ldflags=-w", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, target)
	s.build <- struct{}{}
	out, err := goCommand(ctx, root, args...).CombinedOutput()
	<-s.build
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return r, fmt.Errorf("run go %s: %w", strings.Join(args, " "), err)
	}
	var build strings.Builder
	build.Write(out)
	if err != nil {
		r.build, r.elapsed = build.String(), time.Since(start)
		return r, nil
	}

	s.run <- struct{}{}
	defer func() { <-s.run }()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args = []string{"tool", "test2json", bin, "-test.v=test2json", "-test.paniconexit0", "-test.timeout=2m", "-test.count=1", "-test.run=" + run}
	cmd := goCommand(ctx, filepath.Join(root, target), args...)
	if cluster {
		cmd.Env = append(cmd.Env, idemtest.EnvCitus+"=2")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r.elapsed = time.Since(start)
	if err != nil && !errors.As(err, &exitErr) {
		return r, fmt.Errorf("run go %s: %w", strings.Join(args, " "), err)
	}
	r.passed = err == nil

	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			build.WriteString(sc.Text() + "\n")
			continue
		}
		switch {
		case ev.Action == "build-output":
			build.WriteString(ev.Output)
		case ev.Test == "":
			if ev.Action == "output" {
				build.WriteString(ev.Output)
			}
		case ev.Action == "output":
			r.output[ev.Test] += ev.Output
		case ev.Action == "pass" || ev.Action == "fail":
			r.ran = append(r.ran, ev.Test)
			if ev.Action == "fail" {
				r.failed = append(r.failed, ev.Test)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("read the test events: %w", err)
	}
	build.WriteString(stderr.String())
	r.build = build.String()
	sort.Strings(r.ran)
	sort.Strings(r.failed)
	return r, nil
}

// goCommand is the go command run in dir as a child of this test.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envChild+"=1")
	return cmd
}

// pending is a run of the generated tests started in the background; done
// is closed when r and err hold its outcome.
type pending struct {
	done chan struct{}
	r    result
	err  error
}

// startRun writes m's overlay into a directory of its own and starts the
// run of the generated tests pattern selects against it, under s. An edit
// that does not apply is the run's error.
func startRun(ctx context.Context, t *testing.T, wg *sync.WaitGroup, s slots, root string, m mutation, pattern string) *pending {
	t.Helper()
	p := &pending{done: make(chan struct{})}
	dir := t.TempDir()
	overlay, err := writeOverlay(root, dir, m)
	if err != nil {
		p.err = err
		close(p.done)
		return p
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.done)
		p.r, p.err = runGenerated(ctx, s, root, dir, overlay, pattern, m.cluster)
	}()
	return p
}

// wait returns the run's result, failing t if it could not be run.
func (p *pending) wait(t *testing.T) result {
	t.Helper()
	<-p.done
	require.NoError(t, p.err)
	return p.r
}

// leaves returns the subtests among names (dropping parents of subtests).
func leaves(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.Contains(n, "/") {
			out = append(out, n)
		}
	}
	return out
}

// mutate writes the mutated copies of m's files and the overlay that swaps
// them in under dir, and returns the overlay's path (writeOverlay).
func mutate(t *testing.T, root, dir string, m mutation) string {
	t.Helper()
	overlay, err := writeOverlay(root, dir, m)
	require.NoError(t, err)
	return overlay
}

// writeOverlay writes the mutated copies of m's files and the overlay that
// swaps them in under dir, and returns the overlay's path. Every edit must
// match exactly once in the text it is applied to (earlier edits of the
// same file included).
func writeOverlay(root, dir string, m mutation) (string, error) {
	texts := map[string]string{}
	var order []string
	for _, e := range m.edits {
		text, ok := texts[e.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, "runtime", "idem", e.file))
			if err != nil {
				return "", fmt.Errorf("mutation %s: %w", m.name, err)
			}
			text = string(b)
			order = append(order, e.file)
		}
		if n := strings.Count(text, e.old); n != 1 {
			return "", fmt.Errorf("mutation %s no longer applies to runtime/idem/%s: the text it replaces occurs %d times, not once (gone or ambiguous); update the mutation to the runtime's new source:\n%s",
				m.name, e.file, n, e.old)
		}
		texts[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	replace := map[string]string{}
	for _, f := range order {
		path := filepath.Join(dir, strings.ReplaceAll(f, "../", "up/"))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", fmt.Errorf("mutation %s: %w", m.name, err)
		}
		if err := os.WriteFile(path, []byte(texts[f]), 0o644); err != nil {
			return "", fmt.Errorf("mutation %s: %w", m.name, err)
		}
		replace[filepath.Join(root, "runtime", "idem", f)] = path
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return "", fmt.Errorf("mutation %s: %w", m.name, err)
	}
	path := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(path, overlay, 0o644); err != nil {
		return "", fmt.Errorf("mutation %s: %w", m.name, err)
	}
	return path, nil
}

// failureReport is a run's failing tests with their output, for messages.
func failureReport(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "failed: %v\n", r.failed)
	for _, name := range leaves(r.failed) {
		fmt.Fprintf(&b, "--- %s\n%s", name, r.output[name])
	}
	if r.build != "" {
		fmt.Fprintf(&b, "--- build and package output\n%s", r.build)
	}
	return b.String()
}

// only selects mutations by name (-mutations), for a change that touches a
// few of them; the control runs whatever it selects.
var only = flag.String("mutations", "", "run only the mutations whose name matches this regular expression")

// selected returns the mutations -mutations selects (every one by default).
func selected(t *testing.T) []mutation {
	t.Helper()
	re, err := regexp.Compile(*only)
	require.NoError(t, err, "-mutations")
	var ms []mutation
	for _, m := range mutations() {
		if re.MatchString(m.name) {
			ms = append(ms, m)
		}
	}
	return ms
}

// TestMutationsApply checks, without a database, that every mutation still
// matches the runtime's source exactly once per edit and that the mutated
// runtime still builds (a mutation that cannot build proves nothing). The
// builds it makes are the ones the mutants' test binaries reuse from the
// build cache.
func TestMutationsApply(t *testing.T) {
	root := repoRoot(t)
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			require.NotEmpty(t, m.edits)
			require.NotEmpty(t, m.caught)
			dir := t.TempDir()
			overlay := mutate(t, root, dir, m)
			b, err := os.ReadFile(overlay)
			require.NoError(t, err)
			var o struct{ Replace map[string]string }
			require.NoError(t, json.Unmarshal(b, &o))
			for orig := range o.Replace {
				assert.FileExists(t, orig)
			}
			build := exec.Command("go", "build", "-overlay="+overlay, "./runtime/idem/")
			build.Dir = root
			out, err := build.CombinedOutput()
			require.NoErrorf(t, err, "the mutated runtime does not build:\n%s", out)
		})
	}
}

// TestGeneratedTestsCatchMutations runs the example's generated tests once
// against the runtime as it is, overlaid by unchanged copies (they must pass,
// so any later failure is the mutation's doing), then, for each mutation,
// only the generated subtests expected to catch it, and asserts that each of
// them fails for the named reason. Every run starts at once in the
// background (newSlots bounds how many build and how many run side by
// side); each builds its own test binary against its copy of the runtime
// and starts its own PostgreSQL, and each mutation's subtest waits for its
// run. It ends with the kill table: each mutation and the generated
// subtests that caught it.
func TestGeneratedTestsCatchMutations(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Logf("%s is set: this is a go test started by this test, which does not run itself again", envChild)
		return
	}
	root := repoRoot(t)
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	s := newSlots()

	ms := selected(t)
	control := startRun(ctx, t, &wg, s, root, unchanged(ms), runPattern)
	runs := make([]*pending, len(ms))
	for i, m := range ms {
		runs[i] = startRun(ctx, t, &wg, s, root, m, pattern(slices.Sorted(maps.Keys(m.caught))))
	}
	// Registered after the runs' directories, so it runs before they are
	// removed: no run outlives the test.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	c := control.wait(t)
	require.Truef(t, c.passed, "the generated tests must pass against the unmutated runtime\n%s", failureReport(c))
	generated := leaves(c.ran)
	require.NotEmpty(t, generated, "no generated subtests ran:\n%s", c.build)
	t.Logf("control: all %d generated subtests passed in %s", len(generated), c.elapsed.Round(100*time.Millisecond))

	kills := map[string][]string{}
	t.Cleanup(func() {
		t.Log(killTable(kills))
		t.Logf("the control run and the mutations took %s", time.Since(start).Round(100*time.Millisecond))
	})
	for i, m := range ms {
		t.Run(m.name, func(t *testing.T) {
			t.Log("bug: " + m.bug)
			names := slices.Sorted(maps.Keys(m.caught))
			for _, name := range names {
				require.Containsf(t, generated, name, "%s names a generated subtest the control run did not run", m.name)
			}
			r := runs[i].wait(t)
			require.Falsef(t, r.passed, "the generated tests passed with the mutation applied: they do not catch it\n%s", r.build)
			failed := leaves(r.failed)
			require.NotEmptyf(t, failed, "the run failed but no generated subtest did (did the mutated runtime build?)\n%s", r.build)
			var killed, notes []string
			for _, name := range names {
				if !assert.Containsf(t, failed, name, "expected %s to catch the mutation\n%s", name, failureReport(r)) {
					continue
				}
				out := r.output[name]
				if assert.Regexpf(t, m.caught[name], out, "%s failed, but not for the expected reason", name) {
					killed = append(killed, name)
					notes = append(notes, fmt.Sprintf("%s: %s", name, m.caught[name].FindString(out)))
				}
			}
			kills[m.name] = killed
			t.Logf("ran %d generated subtests in %s (build, wait and run); caught by:\n  %s", len(leaves(r.ran)), r.elapsed.Round(100*time.Millisecond),
				strings.Join(notes, "\n  "))
			if testing.Verbose() {
				t.Logf("their failures:\n%s", failureReport(r))
			}
		})
	}
}

// killTable renders, for each mutation, the generated subtests that failed
// under it for the expected reason.
func killTable(kills map[string][]string) string {
	var b strings.Builder
	b.WriteString("kill table (mutation: generated subtests that caught it)\n")
	for _, name := range slices.Sorted(maps.Keys(kills)) {
		if len(kills[name]) == 0 {
			fmt.Fprintf(&b, "  %s: NOT KILLED\n", name)
			continue
		}
		fmt.Fprintf(&b, "  %s:\n", name)
		for _, sub := range kills[name] {
			fmt.Fprintf(&b, "      %s\n", sub)
		}
	}
	return b.String()
}
