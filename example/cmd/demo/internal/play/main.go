// Command play is the demo itself, which example/cmd/demo's launcher builds
// and runs. It runs the example payments service on a throwaway PostgreSQL
// and plays a client against it, printing step by step what idempotency keys
// do for it:
//
//  1. a charge whose first response is lost by the network: the retry with
//     the same key replays the original response, and the card is charged once;
//  2. the same key with another amount: 422;
//  3. a twin of a payout that is waiting for a slow bank: 409 with
//     Retry-After, then a replay; the bank transfers once;
//  4. a declined card: the retry replays the decline;
//  5. an inline-mode deposit whose first response is lost: the retry
//     replays the row;
//  6. the outbox (example/outbox): a charge enqueues its receipt email as a
//     River job in its own transaction; its retry replays, and the email
//     worker, lost after the send, is retried: one email.
//
// It exits 0 when every check holds and 1 otherwise.
//
// Usage:
//
//	go run -C example/cmd/demo .               # play the demo
//	go run -C example/cmd/demo . -serve        # keep the API up on 127.0.0.1:8080 for curl
//
// The demo is a module of its own (example/cmd/demo/go.mod), so goose stays
// out of the requirements of github.com/idemgen/idemgen.
//
// With DATABASE_URL set, the demo uses that database instead of starting
// its own server, and applies the example's migrations to it with goose.
// Otherwise it needs the PostgreSQL server binaries (initdb, postgres) on
// PATH or under /usr/lib/postgresql/*/bin; run as root, the server runs as
// the postgres user.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/example/cmd/demo/scenario"
	"github.com/idemgen/idemgen/runtime/idemtest/pgserver"
)

// defaultAddr is where -serve listens unless -addr says otherwise; the
// curl examples of docs/http.md use it. defaultGRPCAddr is the grpc-go server's.
const (
	defaultAddr     = "127.0.0.1:8080"
	defaultGRPCAddr = "127.0.0.1:9090"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its arguments and outputs, returning the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("demo", flag.ContinueOnError)
	fl.SetOutput(stderr)
	serve := fl.Bool("serve", false, "serve the API until interrupted instead of playing the demo")
	addr := fl.String("addr", defaultAddr, "listen address of the API with -serve (HTTP, and Connect and gRPC over h2c)")
	grpcAddr := fl.String("grpc-addr", defaultGRPCAddr, "listen address of the grpc-go server with -serve")
	bankDelay := fl.Duration("bank-delay", scenario.DefaultBankDelay, "how long each transfer at the fake bank takes")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected arguments %q\n", fl.Args())
		return 2
	}
	if *bankDelay <= 0 {
		*bankDelay = -1 // scenario.Options: no delay
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo(ctx, stdout, stderr, *serve, *addr, *grpcAddr, *bankDelay); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "demo: interrupted")
		} else {
			fmt.Fprintf(stderr, "\ndemo failed: %v\n", err)
		}
		return 1
	}
	return 0
}

// demo finds or starts a database, then plays the demo or serves the API.
func demo(ctx context.Context, stdout, stderr io.Writer, serve bool, addr, grpcAddr string, bankDelay time.Duration) (err error) {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL != "" {
		fmt.Fprintln(stdout, "Using the database in DATABASE_URL.")
	} else {
		fmt.Fprint(stdout, "Starting a throwaway PostgreSQL (initdb, then postgres on a unix socket)")
		start := time.Now()
		dots := scenario.Dots(stdout, 500*time.Millisecond)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		srv, err := startPostgres(sctx)
		cancel()
		dots()
		if err != nil {
			fmt.Fprintln(stdout)
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		fmt.Fprintf(stdout, " ready in %.1fs\n  %s (binaries from %s)\n", time.Since(start).Seconds(), srv.Dir(), srv.Bin())
		defer func() {
			fmt.Fprintln(stdout, "Stopping PostgreSQL and removing its directory.")
			if serr := srv.Close(); err == nil && serr != nil {
				err = fmt.Errorf("stop PostgreSQL: %w", serr)
			}
		}()
		dbURL = srv.URL("postgres")
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts := scenario.Options{BankDelay: bankDelay, Log: log}
	if !serve {
		_, err := scenario.Run(ctx, stdout, dbURL, opts)
		return err
	}

	opts.Addr, opts.GRPCAddr = addr, grpcAddr
	env, err := scenario.Start(ctx, dbURL, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nThe example payments API is serving on %s (bank transfers take %s).\n", env.APIURL, env.BankDelay)
	fmt.Fprintf(stdout, "Try it (docs/http.md, \"HTTP API by hand (curl)\"):\n\n")
	fmt.Fprintf(stdout, "  curl -i %s/v1/charges \\\n", env.APIURL)
	fmt.Fprintf(stdout, "    -H 'Authorization: Bearer acct_42' -H 'Idempotency-Key: \"order-1042\"' -H 'Content-Type: application/json' \\\n")
	fmt.Fprintf(stdout, "    -d '{\"amount_cents\":1250,\"currency\":\"EUR\",\"card\":{\"number\":\"4242424242424242\",\"exp_month\":12,\"exp_year\":2030},\"description\":\"order 1042\"}'\n\n")
	fmt.Fprintf(stdout, "The same service answers gRPC on %s (grpc-go, runtime/idemgrpc) and Connect and gRPC on %s\n", env.GRPCAddr, env.APIURL)
	fmt.Fprintf(stdout, "(connect-go, runtime/idemconnect): see docs/grpc.md.\n\n")
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nStopping the API.")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return env.Close(sctx)
}

// startPostgres starts the demo's throwaway server: on a unix socket in a
// temporary directory, with durability switched off.
func startPostgres(ctx context.Context) (*pgserver.Server, error) {
	srv, err := pgserver.Start(ctx, pgserver.Config{
		Prefix:   "idemgen-demo-",
		Settings: []string{"synchronous_commit=off", "full_page_writes=off"},
	})
	switch {
	case errors.Is(err, pgserver.ErrNoBinaries):
		return nil, fmt.Errorf("%w: install them (Debian/Ubuntu: apt-get install postgresql-15; Fedora: dnf install postgresql-server; macOS: brew install postgresql@15) "+
			"or set DATABASE_URL to a server to use", err)
	case errors.Is(err, pgserver.ErrNoServerUser):
		return nil, fmt.Errorf("%w; run the demo as a normal user, create one (useradd --system postgres), or set DATABASE_URL", err)
	}
	return srv, err
}
