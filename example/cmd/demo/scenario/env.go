// Package scenario runs the example payments service and plays the demo
// client against it. The demo command (example/cmd/demo) and the end-to-end
// test (scenario/e2e_test.go) share it, so CI runs exactly what a person
// sees with go run -C example/cmd/demo . (the demo is a module of its own).
package scenario

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/pressly/goose/v3"
	"google.golang.org/grpc"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// DefaultBankDelay is how long each transfer at the fake bank takes: long
// enough to send a twin request while a payout is in progress.
const DefaultBankDelay = 2 * time.Second

// Options configures Start.
type Options struct {
	// Addr is the API's listen address; "" means a free loopback port. The
	// same port serves the payments service over Connect and connect-go's
	// gRPC protocol (HTTP/2 without TLS).
	Addr string
	// GRPCAddr is the grpc-go server's listen address; "" means a free
	// loopback port.
	GRPCAddr string
	// BankDelay is how long each bank transfer takes; 0 means
	// DefaultBankDelay, a negative value none.
	BankDelay time.Duration
	// Log receives the API's and the ledger's logs; nil discards them.
	Log *slog.Logger

	// api builds the HTTP API; nil means example.NewAPI over the
	// idempotent service. Tests replace it to prove the scenario fails when
	// idempotency is missing.
	api func(svc *example.IdempotentPayments, inner *example.Payments, pool *pgxpool.Pool, log *slog.Logger) http.Handler
}

// Env is the example service running on one database: migrations applied,
// the fake bank and the API serving on loopback.
type Env struct {
	// Pool is connected to the database the service uses.
	Pool *pgxpool.Pool
	// Bank is the fake bank payouts go to; it counts the transfers it made.
	Bank *example.FakeBank
	// BankDelay is how long each bank transfer takes.
	BankDelay time.Duration
	// APIURL is the base URL of the payments API, e.g. http://127.0.0.1:8080.
	APIURL string
	// GRPCAddr is the address of the grpc-go server of the payments service
	// (example/grpcapi), e.g. 127.0.0.1:9090.
	GRPCAddr string
	// BankURL is the base URL of the fake bank.
	BankURL string
	// Migrations lists the goose migrations Start applied (none when the
	// database was already up to date).
	Migrations []string

	servers []*http.Server
	grpc    *grpc.Server
}

// Start applies example.Migrations to the database at dbURL with goose,
// connects the service to it, and starts the fake bank and the API. Close
// stops them.
func Start(ctx context.Context, dbURL string, opts Options) (_ *Env, err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Env{BankDelay: opts.BankDelay}
	if e.BankDelay == 0 {
		e.BankDelay = DefaultBankDelay
	}
	if e.BankDelay < 0 {
		e.BankDelay = 0
	}
	if e.Migrations, err = Migrate(ctx, dbURL); err != nil {
		return nil, err
	}
	if e.Pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	defer func() {
		if err != nil {
			_ = e.Close(context.Background())
		}
	}()
	if err := e.Pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	store, err := idem.NewStore(e.Pool, idem.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("ledger store: %w", err)
	}

	e.Bank = example.NewFakeBank()
	e.Bank.Delay = e.BankDelay
	if e.BankURL, err = e.serve("127.0.0.1:0", e.Bank); err != nil {
		return nil, fmt.Errorf("start the bank: %w", err)
	}
	inner := example.NewPayments(e.Pool, &example.Bank{BaseURL: e.BankURL})
	svc := example.NewIdempotentPayments(inner, store)
	api := example.NewAPI(svc, log)
	if opts.api != nil {
		api = opts.api(svc, inner, e.Pool, log)
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	protoSvc := grpcapi.NewIdempotentPayments(grpcapi.NewPayments(inner), store)
	mux.Handle(grpcapi.NewConnectHandler(protoSvc))
	if e.APIURL, err = e.serve(addr, mux); err != nil {
		return nil, fmt.Errorf("start the API: %w", err)
	}
	if e.GRPCAddr, err = e.serveGRPC(opts.GRPCAddr, grpcapi.NewGRPCServer(protoSvc)); err != nil {
		return nil, fmt.Errorf("start the gRPC server: %w", err)
	}
	return e, nil
}

// Migrate applies example.Migrations to the database at dbURL with goose
// and returns the names of the migrations it applied.
func Migrate(ctx context.Context, dbURL string) ([]string, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, fmt.Errorf("migrate: open database: %w", err)
	}
	defer db.Close()
	fsys, err := fs.Sub(example.Migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: goose up: %w", err)
	}
	names := make([]string, 0, len(results))
	for _, r := range results {
		names = append(names, r.Source.Path)
	}
	return names, nil
}

// serve starts an HTTP server for h on addr and returns its base URL.
func (e *Env) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true) // h2c, for Connect and gRPC clients
	e.servers = append(e.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// serveGRPC starts srv on addr ("" means a free loopback port) and returns
// the address it listens on.
func (e *Env) serveGRPC(addr string, srv *grpc.Server) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	e.grpc = srv
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

// stopGRPC stops the grpc-go server gracefully, or at once when ctx ends.
func (e *Env) stopGRPC(ctx context.Context) {
	if e.grpc == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		e.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		e.grpc.Stop()
		<-done
	}
}

// Close stops the API and the bank, waiting (within ctx) for requests in
// flight to finish, and closes the database pool.
func (e *Env) Close(ctx context.Context) error {
	var errs []error
	// The APIs first: their requests in flight may still call the bank.
	e.stopGRPC(ctx)
	for i := len(e.servers) - 1; i >= 0; i-- {
		if err := e.servers[i].Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop server: %w", err))
		}
	}
	if e.Pool != nil {
		e.Pool.Close()
	}
	return errors.Join(errs...)
}

// Run starts the example on the database at dbURL, plays the demo client
// against it, printing what happens to w, and stops it. It returns an error
// if any expectation fails.
func Run(ctx context.Context, w io.Writer, dbURL string, opts Options) (_ *Result, err error) {
	fmt.Fprintln(w, "Applying the migrations with goose and starting the service...")
	env, err := Start(ctx, dbURL, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if cerr := env.Close(sctx); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return Play(ctx, w, env)
}
