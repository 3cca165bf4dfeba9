package idemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// Server is a PostgreSQL server of its own for a program that is not a test,
// such as a benchmark command: the same throwaway server New uses (or the one
// EnvDatabaseURL names), started by Start and stopped by Stop instead of
// living as long as the test binary.
type Server struct {
	srv *server
}

// ServerOption configures Start.
type ServerOption func(*serverOptions)

type serverOptions struct {
	settings []string
}

// WithSettings adds server settings, each "name=value" as for postgres -c,
// e.g. "shared_preload_libraries=pg_stat_statements". They apply to a
// throwaway server only: Start refuses them when EnvDatabaseURL names a
// server, whose settings are its owner's.
func WithSettings(kv ...string) ServerOption {
	return func(o *serverOptions) { o.settings = append(o.settings, kv...) }
}

// Start starts a throwaway server as New would (or connects to the one
// EnvDatabaseURL names). The caller must Stop it.
func Start(ctx context.Context, opts ...ServerOption) (*Server, error) {
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	for _, kv := range o.settings {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("idemtest: server setting %q is not name=value", kv)
		}
	}
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		if len(o.settings) > 0 {
			return nil, fmt.Errorf("idemtest: %s names a server whose settings this program cannot change (%s); unset it to start a throwaway server, or set them on that server", EnvDatabaseURL, strings.Join(o.settings, ", "))
		}
		srv, err := startServer(ctx)
		if err != nil {
			return nil, err
		}
		return &Server{srv: srv}, nil
	}
	bin, err := findBinaries(pgserver.DebianBinaries)
	if err != nil {
		return nil, err
	}
	srv, err := startLocal(ctx, bin, o.settings)
	if err != nil {
		return nil, err
	}
	return &Server{srv: srv}, nil
}

// NewDB creates a fresh database on s, with the options New takes; name
// appears in the database's name. Close drops it.
func (s *Server) NewDB(ctx context.Context, name string, opts ...Option) (*DB, error) {
	o := options{table: idem.DefaultTable}
	for _, opt := range opts {
		opt(&o)
	}
	return s.srv.newDB(ctx, name, o)
}

// Open creates a fresh database named after name, as New does, on the
// server New uses (started on first use, stopped by Main), for code that
// has no testing.TB: a runnable Example. The caller closes it with Close,
// which drops it.
func Open(ctx context.Context, name string, opts ...Option) (*DB, error) {
	o := options{table: idem.DefaultTable}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := getServer()
	if err != nil {
		return nil, err
	}
	return srv.newDB(ctx, name, o)
}

// Stop stops a throwaway server and removes its directory, or disconnects
// from the server EnvDatabaseURL names.
func (s *Server) Stop() error {
	return s.srv.stop()
}

// Close closes the database's pool and drops the database. New's databases
// are closed at the end of their test; a program closes those NewDB made.
// Closing twice is harmless.
func (db *DB) Close() error {
	if db.srv == nil {
		return errors.New("idemtest: Close of a DB that New or NewDB did not make")
	}
	return db.close()
}
