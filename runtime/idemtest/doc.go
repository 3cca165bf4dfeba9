// Package idemtest gives tests a throwaway PostgreSQL and the twin/storm
// runners that idemgen's generated tests use.
//
// [New] creates one fresh database per test, with the idempotency ledger
// applied (or the package's migrations, see below), and drops it when the
// test ends. The databases live on one server
// per test binary:
//
//   - If IDEMGEN_TEST_DATABASE_URL is set, that server is used. Its user must
//     be allowed to CREATE DATABASE; each test gets its own database, so the
//     database named in the URL is never written to.
//   - Otherwise the package starts its own server on first use, from the
//     initdb and postgres binaries found on PATH or under
//     /usr/lib/postgresql/*/bin (the highest version). It listens on a unix
//     socket in a temporary directory only, runs with durability switched off
//     (fsync, synchronous_commit and full_page_writes are off: the data is
//     thrown away), and is stopped when the test binary exits. Run as root,
//     initdb and postgres run as the postgres system user, because PostgreSQL
//     refuses to run as root.
//
// With IDEMGEN_TEST_CITUS set to a number of workers (and no URL), the
// server is a Citus cluster this package starts: each test's database is
// made on every node, with the extension and the workers registered, and
// the pool connects to the coordinator ([EnvCitus]; the extension must be
// installed: scripts/install-citus.sh). The ledger New creates itself is
// distributed by scope; with [WithMigrations] nothing is distributed but
// what the migrations distribute, and a ledger they leave on the
// coordinator beside distributed tables fails New, naming idemgen's
// -distributed flag. A
// test that kills the cluster's nodes starts one of its own with
// [StartCitus] and gets databases from [Server.New].
//
// With neither a URL nor binaries, New fails the test with a message that says
// how to get one. It never skips: a test of idempotency that did not run has
// proved nothing.
//
// Call [Main] from TestMain to stop the server as soon as the tests finish:
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
//
// Without it the server is still stopped when the test binary exits (the
// kernel signals it when its parent dies), and the temporary directory it
// leaves behind is removed by the next test binary that starts a server.
//
// A program that is not a test, such as a benchmark command, gets a server
// of its own from [Start] (with extra server settings from [WithSettings],
// e.g. to preload pg_stat_statements), databases from [Server.NewDB], and
// stops it with [Server.Stop].
//
// The servers are started by package [github.com/idemgen/idemgen/runtime/idemtest/pgserver],
// which a test or demo that needs a server on TCP, one it can kill and
// start again, a primary with standbys or a PgBouncer uses directly.
//
// # Migrations
//
// [WithMigrations] makes New build the database from the package's own
// migration directory, the files the user ships, instead of the default
// ledger: idemgen's generated migrations and the user's own, in version
// order, in any format idemgen writes (goose, golang-migrate, tern, dbmate,
// atlas, plain). Only the up migrations run, each as its tool runs it: in one
// transaction, or statement by statement when the file says so (goose's NO
// TRANSACTION, tern's disable-tx, dbmate's transaction:false, atlas's
// txmode none), so CREATE INDEX CONCURRENTLY works. The files are read
// through package migformat (runtime/idem/ledger/migformat), the description
// of each format the generator writes through too, so tests need none of the
// tools. Before applying, New checks that
// every migration idemgen generated is still there, unchanged and in order,
// and fails the test naming the file otherwise; [Migrations.Check] does the
// same without a database. The set is applied once per test binary into a
// template database that every test's database is copied from.
//
// A fixture test that needs the package's tables, the user's own included:
//
//	var migrations = idemtest.Migrations{Dir: "migrations", Format: "goose"}
//
//	func TestRefundKeepsBalance(t *testing.T) {
//		db := idemtest.New(t, idemtest.WithMigrations(migrations))
//		svc := NewPayments(db.Pool)
//		// ...
//	}
//
// [Migrations.Apply] applies the same files to any connection.
//
// # The generated tests
//
// The scenarios idemgen's generated tests run live here, once: [Atomic],
// [External] and [Inline] are suites, one per mode, and the generated file
// holds one short literal per method saying how to build the service (the
// package's fixtures), call the wrapper and the method, fingerprint and
// sample a request, derive another one ([Vary], or the optional other…Args
// fixture) and count effects; its Run method runs every scenario as a
// subtest against a fresh database holding the package's migrations
// ([Package]). A scenario fixed here reaches every user with the runtime,
// without regenerating. Failures name the scenario (the subtest), the key and,
// where the fixture is at fault, the fixture.
//
// [Twins] and [Storm] release goroutines behind a barrier so that identical
// requests really do race, and return every result in index order.
//
// The package imports nothing beyond the standard library, pgx and
// runtime/idem, so generated tests do not force other dependencies on users.
package idemtest
