package faults

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

const noBouncerHelp = "faults: pgbouncer not found on PATH or in /usr/sbin: run scripts/install-tools.sh as root (it runs apt-get install pgbouncer), or apt-get install pgbouncer"

// bouncer returns the suite's PgBouncer, in transaction pooling mode in
// front of the suite's server, starting it on first use.
func bouncer() (*pgserver.Bouncer, error) {
	suite.bouncerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		suite.bouncer, suite.bouncerErr = pgserver.StartBouncer(ctx, suite.pg, pgserver.BouncerConfig{PoolMode: "transaction"})
		if errors.Is(suite.bouncerErr, pgserver.ErrNoBouncer) {
			suite.bouncerErr = errors.New(noBouncerHelp)
		}
	})
	return suite.bouncer, suite.bouncerErr
}

// TestPgBouncerTransactionMode runs twins through a real PgBouncer in
// transaction pooling mode, where consecutive transactions of one client
// connection may run on different server connections. pgx's exec,
// simple_protocol and cache_describe modes keep no prepared statement across
// transactions and must work. pgx's default, cache_statement, prepares each
// statement once per connection and reuses it by name, which PgBouncer 1.18
// cannot follow: what that does is recorded, and it must fail closed (no
// second effect, no false success); the same keys then complete in exec mode.
func TestPgBouncerTransactionMode(t *testing.T) {
	b, err := bouncer()
	require.NoError(t, err)
	n := size(20, 700)
	for _, m := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"exec", pgx.QueryExecModeExec},
		{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
		{"cache_describe", pgx.QueryExecModeCacheDescribe},
	} {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, "PgBouncer transaction mode, pgx "+m.name, envConfig{upstream: b.Addr(), execMode: m.mode})
			ins := withInline(intents("bouncer-"+m.name, n, n), "bouncer-"+m.name, n)
			e.storm(ins, 4)()
			e.check(ins)
		})
	}
	t.Run("cache_statement", func(t *testing.T) {
		e := newEnv(t, "PgBouncer transaction mode, pgx cache_statement (default)", envConfig{upstream: b.Addr(), execMode: pgx.QueryExecModeCacheStatement})
		ins := intents("bouncer-default", n, n)
		var wg sync.WaitGroup
		for _, in := range ins {
			for range 4 {
				wg.Go(func() {
					for range 3 { // a few tries each, not until done
						if e.call(in, false).err == nil {
							return
						}
					}
				})
			}
		}
		wg.Wait()
		e.checkEffects(ins, false) // fails closed
		e.mu.Lock()
		t.Logf("pgx cache_statement through PgBouncer: %d of %d calls succeeded; errors: %s; first: %v",
			e.fig.ok, e.fig.calls, e.fig.errorsText(), e.firstErrs)
		e.mu.Unlock()
		// The same keys are not retried in a working mode here: an external
		// call whose outcome could not be recorded after its effect may have
		// happened is stored as idem.ErrOutcomeNotRecorded and replays that
		// error (or stays locked until its lock expires), by design.
	})
}
