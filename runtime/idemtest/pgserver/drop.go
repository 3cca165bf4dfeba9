package pgserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is a connection or a pool to a server's maintenance database, as
// DropDatabase needs it: *pgx.Conn and *pgxpool.Pool are both.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// dropRetryPause is the pause between two attempts of DropDatabase.
const dropRetryPause = 250 * time.Millisecond

// DropDatabase drops database db through q, WITH (FORCE), until it is gone
// or ctx ends.
//
// FORCE ends the database's sessions, but PostgreSQL then waits only five
// seconds for them to exit before it fails with SQLSTATE 55006 ("is being
// accessed by other users"). A loaded machine can miss that, and a session
// still connecting counts too: on a Citus node, a backend that runs Citus
// code just before it is ended starts the database's maintenance daemon
// again, which then waits for the drop's lock in the database. So 55006 is
// tried again; any other error is returned at once. When ctx ends first, the
// error lists the sessions still there, for the report.
func DropDatabase(ctx context.Context, q Querier, db string) error {
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{db}.Sanitize() + " WITH (FORCE)"
	err := whileInUse(ctx, func() error {
		_, err := q.Exec(ctx, drop)
		return err
	})
	if inUse(err) {
		return fmt.Errorf("%w (sessions left: %s)", err, sessions(context.WithoutCancel(ctx), q, db))
	}
	return err
}

// whileInUse runs fn until it returns anything but SQLSTATE 55006
// (object_in_use) or ctx ends, pausing dropRetryPause between tries, and
// returns fn's last error. CREATE DATABASE and DROP DATABASE wait five
// seconds for the sessions of the database they copy or drop, and then
// fail with it.
func whileInUse(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil || !inUse(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(dropRetryPause):
		}
	}
}

// inUse reports whether err is PostgreSQL's object_in_use (55006).
func inUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// sessions describes the sessions of database db and its prepared
// transactions, one clause each, for an error message.
func sessions(ctx context.Context, q Querier, db string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := q.Query(ctx, `SELECT format('pid %s %s (%s, %s, wait %s): %s', pid, backend_type,
	coalesce(application_name, ''), coalesce(state, 'no state'), coalesce(wait_event, 'none'), left(coalesce(query, ''), 200))
FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
UNION ALL
SELECT format('prepared transaction %s', gid) FROM pg_prepared_xacts WHERE database = $1`, db)
	if err != nil {
		return "unknown: " + err.Error()
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "unknown: " + err.Error()
	}
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, "; ")
}

// DropDatabase drops database db of s, as the package's DropDatabase does.
func (s *Server) DropDatabase(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgserver: %s: %w", s.name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := DropDatabase(ctx, conn, db); err != nil {
		return fmt.Errorf("pgserver: %s: drop database %s: %w", s.name, db, err)
	}
	return nil
}
