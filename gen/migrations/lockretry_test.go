package migrations

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

const paymentsTable = "CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)"

// stallCase is an ALTER migration on a table that takes writes: the setup
// before it, the migration's up file (plain format, which carries its own
// BEGIN/COMMIT) and the insert the writers run.
type stallCase struct {
	name   string
	setup  []string
	up     string
	insert string // $1 a unique number
	added  string // a column the migration adds
}

func stallCases(t *testing.T, cfg Config) []stallCase {
	t.Helper()
	inline, err := Plan(withInline(cfg), userFiles("plain"))
	require.NoError(t, err)
	old, err := plan(mustDefaults(t, cfg), oldLedger(t), nil)
	require.NoError(t, err)
	evolved, err := Plan(cfg, old)
	require.NoError(t, err)
	return []stallCase{{
		name:   "inline columns on payments",
		setup:  []string{paymentsTable},
		up:     fileEnding(t, inline, "_idemgen_inline_payments.up.sql"),
		insert: "INSERT INTO payments (amount) VALUES ($1)",
		added:  "idempotency_key",
	}, {
		name:   "ledger ALTER on idempotency_keys",
		setup:  oldLedger(t).DDL(),
		up:     fileEnding(t, evolved, "_idemgen_alter_idempotency_keys.up.sql"),
		insert: `INSERT INTO idempotency_keys (scope, method, key, fingerprint, status, expires_at) VALUES ('s', 'M', $1::bigint::text, '\x00', 'done', now() + interval '1 hour')`,
		added:  "locked_until",
	}}
}

func withInline(cfg Config) Config {
	cfg.Inline = []InlineTable{{Table: "payments", Methods: []string{"Payments.Capture"}}}
	cfg.NoLedger = true
	return cfg
}

func fileEnding(t *testing.T, files map[string][]byte, suffix string) string {
	t.Helper()
	for n, b := range files {
		if strings.HasSuffix(n, suffix) {
			return string(b)
		}
	}
	require.Failf(t, "no migration", "none ends in %s", suffix)
	return ""
}

// writers inserts into the table from n connections until stop is closed,
// and reports the longest single insert and how many went through.
type writers struct {
	mu      sync.Mutex
	longest time.Duration
	done    int
	errs    []error
	wg      sync.WaitGroup
}

func startWriters(ctx context.Context, db *idemtest.DB, insert string, n int, stop <-chan struct{}) *writers {
	w := &writers{}
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := db.Pool.Exec(ctx, insert, int64(g)*1_000_000+int64(i))
				took := time.Since(start)
				w.mu.Lock()
				w.longest, w.done = max(w.longest, took), w.done+1
				if err != nil {
					w.errs = append(w.errs, err)
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

var takenRe = regexp.MustCompile(`taken \(attempt (\d+)\)`)

// migrate runs up on its own connection, passing every NOTICE to notices.
func migrate(ctx context.Context, t *testing.T, db *idemtest.DB, up string, notices chan<- string) error {
	cfg, err := pgx.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices <- n.Message }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, up)
	return err
}

// holdTable opens a report's transaction on table: it reads the table and
// stays open, holding ACCESS SHARE, which the migration's ACCESS EXCLUSIVE
// lock must wait for. The returned function ends it.
func holdTable(ctx context.Context, t *testing.T, db *idemtest.DB, table string) func() {
	t.Helper()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT count(*) FROM "+table)
	require.NoError(t, err)
	return func() { require.NoError(t, tx.Commit(ctx)) }
}

// While a report's transaction holds the table, the ALTER migrations (inline
// columns, the ledger's own) retry their lock in short attempts instead of
// one long wait, so the table's writers keep going; once the report ends,
// the migration goes through. The test releases the report only after the
// migration has been refused holdFor times (its NOTICEs), so attempts > 1
// is certain, not a matter of timing. The stall figures are logged, not
// asserted.
func TestAlterMigrationsRetryTheirLockWithoutStallingWriters(t *testing.T) {
	const holdFor = 5
	cfg := Config{Format: "plain", Methods: methods}
	for _, c := range stallCases(t, cfg) {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			db := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup(c.setup...))
			table := strings.Fields(strings.SplitN(c.insert, "INTO ", 2)[1])[0]
			release := holdTable(ctx, t, db, table)
			stop := make(chan struct{})
			w := startWriters(ctx, db, c.insert, 4, stop)

			notices := make(chan string, 1024)
			result := make(chan error, 1)
			start := time.Now()
			go func() { result <- migrate(ctx, t, db, c.up, notices) }()
			var attempts, refused int
			for attempts == 0 {
				select {
				case n := <-notices:
					if strings.Contains(n, "not available") {
						if refused++; refused == holdFor {
							release()
						}
					}
					if m := takenRe.FindStringSubmatch(n); m != nil {
						attempts, _ = strconv.Atoi(m[1])
					}
				case err := <-result:
					require.NoError(t, err, "the migration")
					require.Failf(t, "no lock notice", "the migration ended without saying it took its lock")
				}
			}
			require.NoError(t, <-result, "the migration goes through once the report ends")
			total := time.Since(start)
			close(stop)
			w.wg.Wait()
			require.Empty(t, w.errs, "writers")
			require.Greater(t, attempts, holdFor, "refused while the report held the table")
			var has bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped)`, table, c.added).Scan(&has))
			assert.True(t, has, "column %s added", c.added)
			t.Logf("%s: lock taken at attempt %d, migration took %s in all; %d inserts by 4 writers meanwhile, the longest %s (each lock attempt waits at most %s)",
				c.name, attempts, total.Round(time.Millisecond), w.done, w.longest.Round(time.Millisecond), LockAttemptWait)
		})
	}
}

// A report that never ends: the migration gives up once its budget (half the
// statement_timeout) is spent, with lock_not_available and its own message,
// and changes nothing; the writers went on meanwhile.
func TestAlterMigrationGivesUpCleanly(t *testing.T) {
	cfg := Config{Format: "plain", Methods: methods, StatementTimeout: 2 * time.Second}
	for _, c := range stallCases(t, cfg) {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			db := idemtest.New(t, idemtest.WithoutLedger(), idemtest.WithSetup(c.setup...))
			table := strings.Fields(strings.SplitN(c.insert, "INTO ", 2)[1])[0]
			release := holdTable(ctx, t, db, table)
			defer release()
			stop := make(chan struct{})
			w := startWriters(ctx, db, c.insert, 2, stop)
			notices := make(chan string, 1024)
			err := migrate(ctx, t, db, c.up, notices)
			close(stop)
			w.wg.Wait()
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "a PostgreSQL error: %v", err)
			assert.Equal(t, "55P03", pgErr.Code, "lock_not_available")
			assert.Contains(t, pgErr.Message, "idemgen: no lock on "+table)
			assert.NotEmpty(t, notices, "each refused attempt is a NOTICE")
			var has bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped)`, table, c.added).Scan(&has))
			assert.False(t, has, "nothing changed")
			require.Empty(t, w.errs, "writers")
			assert.Positive(t, w.done, "writers went on")
			t.Logf("%s: gave up after %d refused attempts; %d inserts meanwhile, the longest %s", c.name, len(notices), w.done, w.longest.Round(time.Millisecond))
		})
	}
}
