// Package pgserver starts throwaway PostgreSQL servers and clusters for tests
// and demos: initdb into a temporary directory, postgres on a unix socket
// there and, when asked, on 127.0.0.1 at a free port, with durability
// switched off (a Citus cluster's nodes keep synchronous_commit on);
// stopped cleanly, shut down immediately (SIGQUIT), killed as a crash kills
// (SIGKILL to the postmaster and every backend) and started again on the
// same port; and clusters of such servers: a primary
// with streaming standbys, or a Citus coordinator with its workers.
//
// The binaries are found on PATH or under /usr/lib/postgresql/*/bin (the
// highest version; [FindBinaries]). Run as root, every server binary runs as
// the postgres system user, because PostgreSQL refuses to run as root
// ([ServerUser]). On Linux a server never outlives the process that started
// it: the kernel sends it SIGQUIT, PostgreSQL's immediate shutdown, when that
// process dies, even by SIGKILL; the directory it leaves is removed by the
// next [Start] with the same prefix ([RemoveStale]).
//
// A server:
//
//	srv, err := pgserver.Start(ctx, pgserver.Config{TCP: true, Settings: []string{"max_connections=200"}})
//	if err != nil { ... }
//	defer srv.Close()
//	pool, err := pgxpool.New(ctx, srv.URL("postgres"))
//
// A primary and a synchronous standby:
//
//	c, err := pgserver.StartCluster(ctx, pgserver.ClusterConfig{Standbys: 1})
//	if err != nil { ... }
//	defer c.Close()
//	err = c.Synchronous(ctx, "on")
//	err = c.Primary.Kill(ctx)
//	err = c.Standbys[0].Promote(ctx)
//
// A Citus cluster, a coordinator and two workers (the extension must be
// installed for the server's version: scripts/install-citus.sh), with a
// database made on every node and a node killed and started again:
//
//	c, err := pgserver.StartCitus(ctx, pgserver.CitusConfig{Workers: 2})
//	if err != nil { ... }
//	defer c.Close()
//	err = c.CreateDatabase(ctx, "app")      // on every node, workers registered
//	pool, err := pgxpool.New(ctx, c.URL("app")) // the coordinator
//	w, err := c.WorkerFor(ctx, "app", "idempotency_keys", "tenant-1")
//	err = w.Kill(ctx)
//	err = w.Start(ctx)
//	err = c.WaitReady(ctx, "app")
//
// [StartBouncer] puts a PgBouncer in front of a server. The package imports
// the standard library and pgx only, so runtime/idemtest (and through it
// every generated test) can use it.
package pgserver
