package idemledger

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Exit statuses of Main (see the package documentation).
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitNotFound = 3
	ExitRefused  = 4
	ExitMismatch = 5
)

// Option configures Main.
type Option func(*env)

// WithFingerprint registers the fingerprint function of the method named
// method (its ledger name, e.g. "example.com/shop.Payments.Charge", or the
// name an inline method is inspected by with -method): given the bytes of a
// request file it returns the fingerprint the method's wrapper computes.
func WithFingerprint(method string, fingerprint func(request []byte) ([]byte, error)) Option {
	return func(e *env) { e.fingerprints[method] = fingerprint }
}

// JSONRequest adapts a generated one-parameter fingerprint function, such as
// fingerprintPaymentsCharge(req ChargeRequest) []byte, to WithFingerprint:
// the request file is JSON decoded into T, refusing unknown fields (a typo
// would otherwise read as a mismatch).
func JSONRequest[T any](fingerprint func(T) []byte) func(request []byte) ([]byte, error) {
	return func(request []byte) ([]byte, error) {
		var v T
		dec := json.NewDecoder(strings.NewReader(string(request)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode the request as %T: %w", v, err)
		}
		return fingerprint(v), nil
	}
}

// WithIO replaces the standard streams (tests).
func WithIO(stdin io.Reader, stdout, stderr io.Writer) Option {
	return func(e *env) { e.stdin, e.stdout, e.stderr = stdin, stdout, stderr }
}

// WithTerminal says whether stdin is a terminal a person answers the
// confirmation on; the default asks the operating system.
func WithTerminal(isTerminal bool) Option {
	return func(e *env) { e.terminal = isTerminal }
}

// WithGetenv replaces os.Getenv (tests).
func WithGetenv(getenv func(string) string) Option {
	return func(e *env) { e.getenv = getenv }
}

// env is one run of the command.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	terminal       bool
	getenv         func(string) string
	fingerprints   map[string]func([]byte) ([]byte, error)
}

// exitError carries an exit status and its one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

const usage = `idemledger looks into idempotency keys and releases or deletes one.

Usage:
` + synopsis + `
Every command takes -db URL (default $DATABASE_URL), -table NAME (only that
table), -json, -timeout (default 30s) and -retention (inline keys; default 24h).
Flags come before the key. Run idemledger COMMAND -h for its flags.

` + exitStatuses

// synopsis is one line per command.
const synopsis = `	idemledger inspect [-scope S] [-method M] [-request FILE [-request FILE]] KEY
	idemledger list    [-limit N]
	idemledger stats
	idemledger release -scope S [-method M] [-force] [-yes] KEY
	idemledger delete  -scope S [-method M] [-force] [-yes] KEY
`

// exitStatuses ends every help text. Run the command as a binary (go tool
// idemledger, or one go install built): go run reports any failure of the
// program it ran as its own exit status 1.
const exitStatuses = `Exit status:
	0  done; inspect found the key (and every -request would replay)
	1  an error: the database, a file, a fingerprint this binary does not have
	2  misuse: unknown command or flag, a bad flag value, a missing argument,
	   a key several methods hold
	3  no such key
	4  refused: a live lock without -force, not confirmed, no -yes without a
	   terminal, the row changed meanwhile
	5  inspect -request: a request does not match the key's fingerprint
`

// Main runs the command with args (without the program name) and returns
// its exit status.
func Main(ctx context.Context, args []string, opts ...Option) int {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		terminal: stdinIsTerminal(), fingerprints: map[string]func([]byte) ([]byte, error){}}
	for _, o := range opts {
		o(e)
	}
	err := e.run(ctx, args)
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(e.stderr, "idemledger: "+oneLine(ee.msg))
		}
		return ee.code
	default:
		fmt.Fprintln(e.stderr, "idemledger: "+oneLine(err.Error()))
		return ExitError
	}
}

// oneLine keeps a failure to one line of stderr, whatever its cause's
// message holds.
func oneLine(msg string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
}

func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// command returns a command's flags and run function.
func command(e *env, name string, c *common) (*flag.FlagSet, func(ctx context.Context, db *pgx.Conn, args []string) error, bool) {
	var fs *flag.FlagSet
	var do func(ctx context.Context, db *pgx.Conn, args []string) error
	switch name {
	case "inspect":
		fs, do = e.inspectCmd(c)
	case "list":
		fs, do = e.listCmd(c)
	case "stats":
		fs, do = e.statsCmd(c)
	case "release":
		fs, do = e.mutateCmd(c, "release")
	case "delete":
		fs, do = e.mutateCmd(c, "delete")
	default:
		return nil, nil, false
	}
	return fs, do, true
}

// common holds the flags every command takes.
type common struct {
	db        string
	table     string
	json      bool
	timeout   time.Duration
	retention time.Duration
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.db, "db", "", "PostgreSQL connection string (default $DATABASE_URL)")
	fs.StringVar(&c.table, "table", "", "look only at this table (a ledger or an inline table), e.g. billing.idempotency_keys")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts instead of tables")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "bound on the whole command, every statement included")
	fs.DurationVar(&c.retention, "retention", idem.DefaultRetention, "inline tables: the methods' retention window (when a key counts as expired)")
}

func (e *env) run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(e.stderr, usage)
		if len(args) == 0 {
			return fail(ExitUsage, "")
		}
		return nil
	}
	c := &common{}
	fs, do, ok := command(e, args[0], c)
	if !ok {
		return fail(ExitUsage, "unknown command %q: use inspect, list, stats, release or delete", args[0])
	}
	// The flag package would print the usage after every error, and the
	// error before it: the command prints the usage for -h only, and an
	// error once, on one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			e.commandUsage(fs)
			return err
		}
		return fail(ExitUsage, "%s: %v (idemledger %s -h lists its flags)", args[0], err, args[0])
	}
	url := c.db
	if url == "" {
		url = e.getenv("DATABASE_URL")
	}
	if url == "" {
		return fail(ExitUsage, "no database: pass -db URL or set DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	db, err := connect(ctx, url, c.timeout)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	return do(ctx, db, fs.Args())
}

// commandUsage prints a command's help: its synopsis, its flags and the exit
// statuses.
func (e *env) commandUsage(fs *flag.FlagSet) {
	for _, line := range strings.Split(synopsis, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == fs.Name() {
			fmt.Fprintf(e.stderr, "Usage:\n%s\n\nFlags:\n", line)
		}
	}
	fs.SetOutput(e.stderr)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(e.stderr, "\n"+exitStatuses)
}

// connect opens one connection whose statements are bounded by timeout and
// whose lock waits are short: an operator's command never queues the
// service's traffic behind it for long.
func connect(ctx context.Context, url string, timeout time.Duration) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fail(ExitUsage, "the connection string: %v", err)
	}
	cfg.RuntimeParams["statement_timeout"] = fmt.Sprint(timeout.Milliseconds())
	cfg.RuntimeParams["lock_timeout"] = "2000"
	cfg.RuntimeParams["application_name"] = "idemledger"
	db, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return db, nil
}

// oneKey checks that args is exactly one key.
func oneKey(cmd string, args []string) (string, error) {
	if len(args) != 1 {
		return "", fail(ExitUsage, "%s takes one KEY after its flags (got %d arguments: %q)", cmd, len(args), args)
	}
	return args[0], nil
}

// writeJSON prints v as indented JSON.
func (e *env) writeJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}
