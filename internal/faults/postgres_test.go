package faults

import (
	"context"
	"strconv"

	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// maxConnections leaves room for every scenario's pools plus PgBouncer's.
const maxConnections = 400

// startPostgres starts the suite's own PostgreSQL server, on 127.0.0.1 at a
// free port. runtime/idemtest's server listens on a unix socket only and
// cannot be stopped mid-test; the fault proxy needs TCP and the restart
// scenario kills and starts the server, so the suite starts this one and
// hands it to idemtest through IDEMGEN_TEST_DATABASE_URL: idemtest still
// makes every test's fresh database and applies the ledger.
func startPostgres(ctx context.Context) (*pgserver.Server, error) {
	return pgserver.Start(ctx, pgserver.Config{
		Prefix: "faults-pgserver-",
		TCP:    true,
		Settings: []string{
			"full_page_writes=off",
			"max_connections=" + strconv.Itoa(maxConnections),
			"shared_buffers=64MB",
			"log_min_messages=fatal",
			// As the README advises: a transaction whose client vanished (its
			// connection cut behind the proxy) is ended by the server instead of
			// holding its key until TCP gives up.
			"idle_in_transaction_session_timeout=10s",
			"tcp_keepalives_idle=5",
			"tcp_keepalives_interval=1",
			"tcp_keepalives_count=3",
		},
	})
}
