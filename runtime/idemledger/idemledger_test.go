package idemledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/runtime/idemledger"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// ChargeRequest is the test method's request.
type ChargeRequest struct {
	Amount int64  `json:"amount"`
	Card   string `json:"card"`
}

// Receipt is its response.
type Receipt struct {
	ID     int64  `json:"id"`
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

const chargeName = "example.com/shop.Payments.Charge"

// fingerprintCharge is what generated code writes for the method.
func fingerprintCharge(req ChargeRequest) []byte {
	f := idem.NewFingerprinter(chargeName)
	f.Field("Amount")
	f.Int(req.Amount)
	f.Field("Card")
	f.String(req.Card)
	return f.Sum()
}

// fixture is a database with a ledger and an inline table: a finished
// charge in two scopes, an in-progress claim with a live lock, one whose
// lock expired, an expired row, and an order carrying its key inline.
type fixture struct {
	db  *idemtest.DB
	url string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	inline, err := ledger.NewInline("orders")
	require.NoError(t, err)
	db := idemtest.New(t, idemtest.WithSetup(append([]string{
		`CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL)`,
	}, inline.DDL()...)...))
	s, err := idem.NewStore(db.Pool)
	require.NoError(t, err)
	m := &idem.Method[Receipt]{Name: chargeName}
	for _, scope := range []string{"acme", "globex"} {
		ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "k1"), scope)
		_, err = idem.Atomic(ctx, s, m, fingerprintCharge(ChargeRequest{Amount: 100, Card: "4242"}), func(context.Context, pgx.Tx) (Receipt, error) {
			return Receipt{ID: 7, Amount: 100, Note: "paid"}, nil
		})
		require.NoError(t, err)
	}
	exec(t, db, `INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, created_at, expires_at, locked_until, fence) VALUES
 ('acme', 'example.com/shop.Payments.Payout', 'live', '\x01', 'in_progress', now() - interval '2 minutes', now() + interval '1 day', now() + interval '1 hour', 3),
 ('acme', 'example.com/shop.Payments.Payout', 'stuck', '\x02', 'in_progress', now() - interval '3 hours', now() + interval '1 day', now() - interval '1 hour', 1),
 ('globex', 'example.com/shop.Payments.Payout', 'stuck', '\x02', 'in_progress', now() - interval '3 hours', now() + interval '1 day', now() - interval '1 hour', 1),
 ('acme', 'example.com/shop.Payments.Payout', 'old', '\x03', 'done', now() - interval '3 days', now() - interval '1 day', NULL, 1)`)
	exec(t, db, `INSERT INTO orders (item, idempotency_scope, idempotency_key, idempotency_fingerprint) VALUES ('lamp', 'acme', 'o1', '\x0a0b'), ('old lamp', 'acme', 'o0', '\x0c')`)
	exec(t, db, `UPDATE orders SET idempotency_claimed_at = now() - interval '2 days' WHERE idempotency_key = 'o0'`)
	return &fixture{db: db, url: db.URL}
}

func exec(t *testing.T, db *idemtest.DB, sql string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), sql)
	require.NoError(t, err)
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the command against the fixture's database; stdin is what a
// person types, terminal whether stdin is a terminal.
func (f *fixture) run(t *testing.T, stdin string, terminal bool, opts []idemledger.Option, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	opts = append([]idemledger.Option{
		idemledger.WithIO(strings.NewReader(stdin), &out, &errb),
		idemledger.WithTerminal(terminal),
		idemledger.WithGetenv(func(k string) string {
			if k == "DATABASE_URL" {
				return f.url
			}
			return ""
		}),
	}, opts...)
	code := idemledger.Main(context.Background(), args, opts...)
	return result{code, out.String(), errb.String()}
}

func requestFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "request.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestInspectShowsTheKey(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "", false, nil, "inspect", "-scope", "acme", "-method", "Payments.Charge", "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	for _, want := range []string{"idempotency_keys (ledger)", chargeName, `"k1"`, "done: a retry with the same request replays",
		"lock         none", "response     35 bytes, JSON:", `"note": "paid"`} {
		assert.Contains(t, r.stdout, want)
	}
	r = f.run(t, "", false, nil, "inspect", "-json", "-scope", "acme", "live")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var keys []idemledger.Key
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &keys))
	require.Len(t, keys, 1)
	assert.Equal(t, "in_progress", keys[0].Status)
	assert.True(t, keys[0].LockLive)
	assert.Equal(t, int64(3), keys[0].Fence)
	assert.Contains(t, keys[0].State, "ErrInProgress")

	r = f.run(t, "", false, nil, "inspect", "-scope", "acme", "o1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "orders (inline)")
	assert.Contains(t, r.stdout, `"item": "lamp"`)
	assert.Contains(t, r.stdout, "0a0b")

	r = f.run(t, "", false, nil, "inspect", "-scope", "initech", "k1")
	assert.Equal(t, idemledger.ExitNotFound, r.code, "another scope's key is not found")
	assert.Contains(t, r.stderr, `no key "k1" in scope "initech"`)
}

func TestInspectRequestReplayOrMismatch(t *testing.T) {
	f := newFixture(t)
	fps := []idemledger.Option{idemledger.WithFingerprint(chargeName, idemledger.JSONRequest(fingerprintCharge))}
	same := requestFile(t, `{"amount": 100, "card": "4242"}`)
	other := requestFile(t, `{"amount": 200, "card": "4242"}`)

	r := f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", same, "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "equal, a retry with it REPLAYS")

	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", other, "k1")
	assert.Equal(t, idemledger.ExitMismatch, r.code, r.stderr)
	assert.Contains(t, r.stdout, "MISMATCH")
	hex := func(b []byte) string { return strings.ToLower(strings.TrimSpace(string(mustHex(b)))) }
	assert.Contains(t, r.stdout, hex(fingerprintCharge(ChargeRequest{Amount: 200, Card: "4242"})))

	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", requestFile(t, `{"amout": 100}`), "k1")
	assert.Equal(t, idemledger.ExitError, r.code, "a typo in the file is an error, not a mismatch")
	assert.Contains(t, r.stderr, "unknown field")

	r = f.run(t, "", false, nil, "inspect", "-scope", "acme", "-request", same, "k1")
	assert.Equal(t, idemledger.ExitError, r.code)
	assert.Contains(t, r.stderr, "no fingerprint function for method")
	assert.Contains(t, r.stderr, "idemledger.WithFingerprint")
}

func mustHex(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

func TestListAndStats(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "", false, nil, "list", "-json")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var l idemledger.Listing
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l))
	var inProgress, expired []string
	for _, x := range l.InProgress {
		inProgress = append(inProgress, x.Scope+"/"+x.Key)
	}
	for _, x := range l.Expired {
		expired = append(expired, x.Table+":"+x.Key)
	}
	assert.Equal(t, []string{"acme/stuck", "globex/stuck", "acme/live"}, inProgress, "oldest first")
	assert.Equal(t, []string{"idempotency_keys:old", "orders:o0"}, expired)
	r = f.run(t, "", false, nil, "list")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "IN PROGRESS (oldest first): all 3")
	assert.Contains(t, r.stdout, "expired: a retry takes over")

	r = f.run(t, "", false, nil, "stats", "-json")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var st idemledger.Stats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Methods, 3)
	assert.Equal(t, idemledger.MethodStats{Table: "idempotency_keys", Mode: "ledger", Method: chargeName, Rows: 2}, st.Methods[0])
	assert.Equal(t, idemledger.MethodStats{Table: "idempotency_keys", Mode: "ledger", Method: "example.com/shop.Payments.Payout", Rows: 4, InProgress: 3, Expired: 1}, st.Methods[1])
	assert.Equal(t, idemledger.MethodStats{Table: "orders", Mode: "inline", Method: "(orders)", Rows: 2, Expired: 1}, st.Methods[2])
	require.Len(t, st.Tables, 2)
	for _, ts := range st.Tables {
		assert.Positive(t, ts.TableBytes, ts.Table)
		assert.Positive(t, ts.KeyIndexBytes, ts.Table)
		assert.GreaterOrEqual(t, ts.IndexBytes, ts.KeyIndexBytes, ts.Table)
	}
	r = f.run(t, "", false, nil, "stats")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "LAST AUTOVACUUM")
}

// payout reads one Payout row's lock and fence.
func (f *fixture) payout(t *testing.T, scope, key string) (exists bool, lockLive bool, fence int64) {
	t.Helper()
	err := f.db.Pool.QueryRow(context.Background(), `SELECT coalesce(locked_until > now(), false), fence FROM idempotency_keys
WHERE scope = $1 AND key = $2 AND method = 'example.com/shop.Payments.Payout'`, scope, key).Scan(&lockLive, &fence)
	if err == pgx.ErrNoRows {
		return false, false, 0
	}
	require.NoError(t, err)
	return true, lockLive, fence
}

func TestReleaseRefusesALiveLockAndNeverCrossesScopes(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "", false, nil, "release", "-yes", "stuck")
	assert.Equal(t, idemledger.ExitUsage, r.code, "no -scope")
	assert.Contains(t, r.stderr, "needs -scope")

	r = f.run(t, "", false, nil, "release", "-scope", "acme", "-yes", "live")
	assert.Equal(t, idemledger.ExitRefused, r.code)
	assert.Contains(t, r.stderr, "pass -force")
	_, live, _ := f.payout(t, "acme", "live")
	assert.True(t, live, "untouched")

	r = f.run(t, "", false, nil, "release", "-scope", "acme", "stuck")
	assert.Equal(t, idemledger.ExitRefused, r.code, "not a terminal and no -yes")
	assert.Contains(t, r.stderr, "pass -yes")

	r = f.run(t, "", false, nil, "release", "-scope", "acme", "-method", "Payments.Charge", "-yes", "k1")
	assert.Equal(t, idemledger.ExitRefused, r.code, "a done key has nothing to release")

	r = f.run(t, "", false, nil, "release", "-scope", "acme", "-force", "-yes", "live")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, `idemledger: released key "live" of scope "acme"`)
	_, live, fence := f.payout(t, "acme", "live")
	assert.False(t, live, "released")
	assert.Equal(t, int64(3), fence, "the fence is the takeover's to bump")
	_, live, _ = f.payout(t, "globex", "stuck")
	assert.False(t, live)

	var globexLock time.Time
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT locked_until FROM idempotency_keys WHERE scope = 'globex' AND key = 'stuck'`).Scan(&globexLock))
	r = f.run(t, "", false, nil, "release", "-scope", "acme", "-yes", "stuck")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var after time.Time
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT locked_until FROM idempotency_keys WHERE scope = 'globex' AND key = 'stuck'`).Scan(&after))
	assert.Equal(t, globexLock, after, "the other scope's row with the same key is untouched")
}

func TestDeleteAsksOnATerminal(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "no\n", true, nil, "delete", "-scope", "acme", "-method", "Payments.Charge", "k1")
	assert.Equal(t, idemledger.ExitRefused, r.code)
	assert.Contains(t, r.stderr, "Type yes to go on")
	assert.Contains(t, r.stderr, "not confirmed")

	r = f.run(t, "yes\n", true, nil, "delete", "-scope", "acme", "-method", "Payments.Charge", "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, `idemledger: deleted key "k1" of scope "acme"`)
	r = f.run(t, "", false, nil, "inspect", "-scope", "acme", "k1")
	assert.Equal(t, idemledger.ExitNotFound, r.code)
	r = f.run(t, "", false, nil, "inspect", "-scope", "globex", "k1")
	assert.Equal(t, idemledger.ExitOK, r.code, "the other scope keeps its key")

	r = f.run(t, "", false, nil, "delete", "-scope", "acme", "-yes", "live")
	assert.Equal(t, idemledger.ExitRefused, r.code, "a live lock")

	r = f.run(t, "", false, nil, "delete", "-scope", "acme", "-yes", "-json", "o1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var done idemledger.Done
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &done))
	assert.Equal(t, "deleted", done.Action)
	var rows, keyed int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT count(*), count(idempotency_key) FROM orders`).Scan(&rows, &keyed))
	assert.Equal(t, 2, rows, "an inline key is taken off its row; the row stays")
	assert.Equal(t, 1, keyed)
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	f.url = ""
	r := f.run(t, "", false, nil, "stats")
	assert.Equal(t, idemledger.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "pass -db URL or set DATABASE_URL")
	r = f.run(t, "", false, nil, "frobnicate")
	assert.Equal(t, idemledger.ExitUsage, r.code)
	r = f.run(t, "", false, nil, "inspect", "-db", f.db.URL)
	assert.Equal(t, idemledger.ExitUsage, r.code, "no key")
	r = f.run(t, "", false, nil, "stats", "-db", f.db.URL, "-table", "nosuch")
	assert.Equal(t, idemledger.ExitError, r.code)
	assert.Contains(t, r.stderr, "no table nosuch")
}

// A ledger in another schema is found and named with its schema; -table
// keeps the one table it names.
func TestSchemaQualifiedLedgerAndTableFilter(t *testing.T) {
	f := newFixture(t)
	billing, err := ledger.New("billing.idempotency_keys")
	require.NoError(t, err)
	exec(t, f.db, "CREATE SCHEMA billing")
	for _, stmt := range billing.DDL() {
		exec(t, f.db, stmt)
	}
	exec(t, f.db, `INSERT INTO billing.idempotency_keys (scope, method, key, fingerprint, status, expires_at)
VALUES ('acme', 'example.com/billing.Invoices.Send', 'k1', '\x01', 'done', now() + interval '1 day')`)

	r := f.run(t, "", false, nil, "stats", "-json", "-table", "billing.idempotency_keys")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var st idemledger.Stats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Tables, 1)
	assert.Equal(t, "billing.idempotency_keys", st.Tables[0].Table)
	require.Len(t, st.Methods, 1)
	assert.Equal(t, "example.com/billing.Invoices.Send", st.Methods[0].Method)

	r = f.run(t, "", false, nil, "inspect", "-json", "-scope", "acme", "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var keys []idemledger.Key
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &keys))
	var tables []string
	for _, k := range keys {
		tables = append(tables, k.Table)
	}
	assert.ElementsMatch(t, []string{"idempotency_keys", "billing.idempotency_keys"}, tables, "without -table every ledger is read")

	r = f.run(t, "", false, nil, "delete", "-scope", "acme", "-yes", "k1")
	assert.Equal(t, idemledger.ExitUsage, r.code, "two methods hold the key: name one")
	assert.Contains(t, r.stderr, "name one with -method or -table")
	r = f.run(t, "", false, nil, "delete", "-scope", "acme", "-table", "billing.idempotency_keys", "-yes", "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var left int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM billing.idempotency_keys`).Scan(&left))
	assert.Zero(t, left)
	r = f.run(t, "", false, nil, "inspect", "-scope", "acme", "-method", "Payments.Charge", "k1")
	assert.Equal(t, idemledger.ExitOK, r.code, "the public ledger's key is untouched")
}

// list says how many rows it shows of how many, and when it cut a list;
// the totals count every row, not the rows shown.
func TestListCountsWhatItCuts(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "", false, nil, "list")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "IN PROGRESS (oldest first): all 3\n")
	assert.Contains(t, r.stdout, "EXPIRED, WAITING FOR THE SWEEP (longest first): all 2\n")

	r = f.run(t, "", false, nil, "list", "-limit", "1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "IN PROGRESS (oldest first): 1 of 3, cut at -limit 1\n")
	assert.Contains(t, r.stdout, "EXPIRED, WAITING FOR THE SWEEP (longest first): 1 of 2, cut at -limit 1\n")
	assert.Contains(t, r.stdout, `"stuck"`)
	assert.NotContains(t, r.stdout, `"live"`, "the newest claim is cut")
	assert.NotContains(t, r.stdout, `"o0"`, "the inline key expired last is cut: one row across both tables")

	r = f.run(t, "", false, nil, "list", "-limit", "0")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Equal(t, "IN PROGRESS: 3 (not listed: -limit 0)\n\nEXPIRED, WAITING FOR THE SWEEP: 2 (not listed: -limit 0)\n", r.stdout)

	r = f.run(t, "", false, nil, "list", "-json", "-limit", "0")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var l idemledger.Listing
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l))
	assert.Equal(t, int64(3), l.InProgressTotal)
	assert.Equal(t, int64(2), l.ExpiredTotal)
	assert.Empty(t, l.InProgress)
	assert.Empty(t, l.Expired)

	exec(t, f.db, `INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, created_at, expires_at, locked_until)
SELECT 'acme', 'example.com/shop.Payments.Payout', 'bulk-' || i, '\x04', 'in_progress', now() - interval '1 minute', now() + interval '1 day', now() + interval '1 hour'
FROM generate_series(1, 3211) AS i`)
	exec(t, f.db, `DELETE FROM orders WHERE idempotency_key = 'o0'`)
	r = f.run(t, "", false, nil, "list")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "IN PROGRESS (oldest first): 50 of 3,214, cut at -limit 50\n")
	assert.Contains(t, r.stdout, "EXPIRED, WAITING FOR THE SWEEP (longest first): all 1\n")
	assert.Equal(t, 50+2+1+2, strings.Count(r.stdout, "\n")-1, "50 claims, a header line for each list and its columns, one expired key, the blank line")

	r = f.run(t, "", false, nil, "list", "-table", "orders")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "IN PROGRESS: none\n")
	assert.Contains(t, r.stdout, "EXPIRED, WAITING FOR THE SWEEP: none\n")
}

// Every failure is one line on stderr with its exit status; -h lists the
// statuses.
func TestFailuresAreOneLine(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list", "-limit", "-5"}, idemledger.ExitUsage, "idemledger: list: -limit -5: want 0 (the totals only) or more\n"},
		{[]string{"stats", "-bogus"}, idemledger.ExitUsage, "idemledger: stats: flag provided but not defined: -bogus (idemledger stats -h lists its flags)\n"},
		{[]string{"list", "-limit", "many"}, idemledger.ExitUsage, `idemledger: list: invalid value "many" for flag -limit: parse error (idemledger list -h lists its flags)` + "\n"},
		{[]string{"inspect", "-scope", "acme", "nosuch"}, idemledger.ExitNotFound, `idemledger: no key "nosuch" in scope "acme"` + "\n"},
		{[]string{"frobnicate"}, idemledger.ExitUsage, `idemledger: unknown command "frobnicate": use inspect, list, stats, release or delete` + "\n"},
	} {
		r := f.run(t, "", false, nil, tc.args...)
		assert.Equal(t, tc.code, r.code, tc.args)
		assert.Equal(t, tc.want, r.stderr, tc.args)
		assert.Empty(t, r.stdout, tc.args)
	}

	r := f.run(t, "", false, nil, "list", "-h")
	assert.Equal(t, idemledger.ExitOK, r.code)
	for _, want := range []string{"Usage:\n\tidemledger list    [-limit N]\n", "-limit int", "Exit status:", "3  no such key", "5  inspect -request"} {
		assert.Contains(t, r.stderr, want)
	}
	r = f.run(t, "", false, nil, "-h")
	assert.Equal(t, idemledger.ExitOK, r.code)
	assert.Contains(t, r.stderr, "2  misuse")
}

// The statuses survive as a process's exit status when the command runs as
// a binary (what `go tool idemledger` runs; `go run` would report 1).
func TestBinaryExitStatus(t *testing.T) {
	f := newFixture(t)
	bin := filepath.Join(t.TempDir(), "idemledger")
	build := osexec.Command("go", "build", "-o", bin, "github.com/idemgen/idemgen/cmd/idemledger")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"inspect", "-scope", "acme", "nosuch"}, idemledger.ExitNotFound},
		{[]string{"list", "-limit", "-5"}, idemledger.ExitUsage},
		{[]string{"release", "-scope", "acme", "-yes", "live"}, idemledger.ExitRefused},
		{[]string{"list", "-limit", "1"}, idemledger.ExitOK},
	} {
		cmd := osexec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+f.url)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr.String())
		assert.LessOrEqual(t, strings.Count(stderr.String(), "\n"), 1, tc.args)
	}
}

// RefundRequest is a request with a nested field and one the fingerprint
// leaves out.
type RefundRequest struct {
	Amount int64  `json:"amount"`
	Card   Card   `json:"card"`
	Note   string `json:"note"` // idem:"-": not fingerprinted
}

// Card is nested in RefundRequest.
type Card struct {
	Number string `json:"number"`
	Expiry string `json:"expiry"`
}

const refundName = "example.com/shop.Payments.Refund"

func fingerprintRefund(req RefundRequest) []byte {
	f := idem.NewFingerprinter(refundName)
	f.Field("Amount")
	f.Int(req.Amount)
	f.Field("Card.Number")
	f.String(req.Card.Number)
	f.Field("Card.Expiry")
	f.String(req.Card.Expiry)
	return f.Sum()
}

// refund runs the Refund method on the fixture's database with key k in
// scope acme.
func (f *fixture) refund(t *testing.T, req RefundRequest) error {
	t.Helper()
	s, err := idem.NewStore(f.db.Pool)
	require.NoError(t, err)
	ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "r1"), "acme")
	_, err = idem.Atomic(ctx, s, &idem.Method[Receipt]{Name: refundName}, fingerprintRefund(req), func(context.Context, pgx.Tx) (Receipt, error) {
		return Receipt{ID: 9, Amount: req.Amount}, nil
	})
	return err
}

// inspect shows the last mismatch the ledger recorded beside the stored
// fingerprint; two -request files name the fields that differ, as the
// method fingerprints them.
func TestInspectShowsTheLastMismatch(t *testing.T) {
	f := newFixture(t)
	first := RefundRequest{Amount: 100, Card: Card{Number: "4242", Expiry: "12/30"}, Note: "first"}
	retry := RefundRequest{Amount: 150, Card: Card{Number: "4343", Expiry: "12/30"}, Note: "again"}
	require.NoError(t, f.refund(t, first))
	r := f.run(t, "", false, nil, "inspect", "-scope", "acme", "r1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "mismatch     none recorded")

	require.ErrorIs(t, f.refund(t, retry), idem.ErrMismatch)
	r = f.run(t, "", false, nil, "inspect", "-json", "-scope", "acme", "r1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	var keys []idemledger.Key
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &keys))
	require.Len(t, keys, 1)
	require.NotNil(t, keys[0].LastMismatch)
	assert.Equal(t, string(mustHex(fingerprintRefund(retry))), keys[0].LastMismatch.Fingerprint)
	assert.Equal(t, string(mustHex(fingerprintRefund(first))), keys[0].Fingerprint)
	assert.False(t, keys[0].LastMismatch.Earlier)
	assert.WithinDuration(t, keys[0].Now, keys[0].LastMismatch.At, time.Hour, "recorded by the database's clock")

	fps := []idemledger.Option{idemledger.WithFingerprint(refundName, idemledger.JSONRequest(fingerprintRefund))}
	firstFile := requestFile(t, `{"amount": 100, "card": {"number": "4242", "expiry": "12/30"}, "note": "first"}`)
	retryFile := requestFile(t, `{"amount": 150, "card": {"number": "4343", "expiry": "12/30"}, "note": "again"}`)
	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", firstFile, "-request", retryFile, "r1")
	assert.Equal(t, idemledger.ExitMismatch, r.code, r.stderr)
	assert.Contains(t, r.stdout, "mismatch     last at ")
	assert.Contains(t, r.stdout, firstFile+" fingerprints to "+string(mustHex(fingerprintRefund(first)))+": equal, a retry with it REPLAYS")
	assert.Contains(t, r.stdout, retryFile+" fingerprints to "+string(mustHex(fingerprintRefund(retry)))+": MISMATCH")
	assert.Contains(t, r.stdout, "it is the request last refused")
	assert.Contains(t, r.stdout, "differs      amount, card.number: the fields of "+retryFile+" that change the fingerprint of "+firstFile)

	r = f.run(t, "", false, fps, "inspect", "-json", "-scope", "acme", "-request", firstFile, "-request", retryFile, "r1")
	assert.Equal(t, idemledger.ExitMismatch, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &keys))
	assert.Equal(t, []string{"amount", "card.number"}, keys[0].Differs, "note is not fingerprinted; expiry is equal")
	assert.True(t, keys[0].Request2.LastRefused)
	assert.False(t, keys[0].Request.LastRefused)

	exec(t, f.db, `UPDATE idempotency_keys SET created_at = mismatch_at + interval '1 second' WHERE key = 'r1'`)
	r = f.run(t, "", false, nil, "inspect", "-scope", "acme", "r1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "before the row's current request was claimed (it refused the key's previous use)")

	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", retryFile, "r1")
	assert.Equal(t, idemledger.ExitMismatch, r.code)
	assert.Contains(t, r.stdout, "to name the fields, pass the first request too: -request FIRST -request "+retryFile)

	noteOnly := requestFile(t, `{"amount": 100, "card": {"number": "4242", "expiry": "12/30"}, "note": "changed"}`)
	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", firstFile, "-request", noteOnly, "r1")
	assert.Equal(t, idemledger.ExitOK, r.code, "a field the fingerprint leaves out replays: %s", r.stderr)
	assert.NotContains(t, r.stdout, "differs")

	r = f.run(t, "", false, fps, "inspect", "-scope", "acme", "-request", firstFile, "-request", retryFile, "-request", noteOnly, "r1")
	assert.Equal(t, idemledger.ExitUsage, r.code)
	assert.Equal(t, "idemledger: inspect: -request given 3 times: give it once (would it replay?) or twice (which fields differ?)\n", r.stderr)
}

// A ledger migrated by an earlier idemgen has no mismatch columns: inspect
// says so instead of failing.
func TestInspectOnALedgerWithoutMismatchColumns(t *testing.T) {
	f := newFixture(t)
	exec(t, f.db, `ALTER TABLE idempotency_keys DROP COLUMN mismatch_at, DROP COLUMN mismatch_fingerprint`)
	r := f.run(t, "", false, nil, "inspect", "-scope", "acme", "-method", "Payments.Charge", "k1")
	require.Equal(t, idemledger.ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "mismatch     not recorded: the table lacks the mismatch_at and mismatch_fingerprint columns")
}
