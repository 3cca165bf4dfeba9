// Command idemgen makes service methods idempotent on PostgreSQL. It reads
// //go:generate idemgen directives in the doc comments of methods and writes,
// beside the package: typed wrappers with request fingerprints (idem_gen.go),
// twin-request tests (idem_gen_test.go) and the ledger's SQL migrations.
//
// Usage:
//
//	//go:generate idemgen [flags]          (or: go tool idemgen, go run github.com/idemgen/idemgen/cmd/idemgen)
//	idemgen [-check] [-tags=TAGS] [-v] [-q] [-debug-model] PACKAGES
//
// Exit status: 0 on success, 1 when generation fails or -check finds stale
// output, 2 on misuse.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"

	// Its init ends a directive whose package is up to date before the
	// packages below are initialised.
	"github.com/idemgen/idemgen/cmd/idemgen/internal/fastpath"
	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/gen/migrations"
)

var usage = `idemgen makes service methods idempotent on PostgreSQL.

Annotate a method with a directive in its doc comment and run go generate:

	// Charge moves money from a card to the merchant's balance.
	//
	//go:generate idemgen -retention=48h -final-errors=ErrCardDeclined
	func (p *Payments) Charge(ctx context.Context, tx pgx.Tx, req ChargeRequest) (Receipt, error)

The directive may also be written "go tool idemgen ..." (Go 1.24 tool
directive) or "go run github.com/idemgen/idemgen/cmd/idemgen ...".

Usage:
	idemgen [directive flags]                  as a go:generate directive ($GOFILE set)
	idemgen [-check] [-tags=T] [-v] PACKAGES   on package patterns, e.g. ./...

Flags (a directive takes all but -check; a package run takes -check, -tags,
-v, -q and -debug-model):
` + gen.FlagHelp() + `
Exit status: 0 success, 1 generation errors or stale output (-check), 2 misuse.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options is what one run was asked to do.
type options struct {
	cfg                               gen.Config
	check, verbose, quiet, debugModel bool
}

// run is the whole command, testable without a process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	var o options
	var code int
	if goFile := os.Getenv("GOFILE"); goFile != "" && !hasPositional(args) {
		o, code = parseDirective(args, goFile, stderr)
	} else {
		o, code = parsePackageRun(args, stdout, stderr)
	}
	if code >= 0 {
		return code
	}
	o.cfg.Dir = wd
	return generate(ctx, o, wd, stdout, stderr)
}

// parseDirective reads the flags of a go:generate directive in goFile. A
// code of 0 or more ends the run with that status.
func parseDirective(args []string, goFile string, stderr io.Writer) (options, int) {
	var o options
	d, problems := gen.ParseDirectiveArgs(withoutRunFlags(args, &o.check, &o.quiet))
	if len(problems) > 0 {
		pos := goFile
		if line := os.Getenv("GOLINE"); line != "" {
			pos += ":" + line
		}
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s: %s\n", pos, p)
		}
		fmt.Fprint(stderr, "run idemgen -help for usage\n")
		return o, 2
	}
	o.cfg.GoFile, o.cfg.Tags = goFile, d.Tags
	o.verbose, o.debugModel = d.IsSet("v"), d.IsSet("debug-model")
	return o, -1
}

// parsePackageRun reads the flags and package patterns of a package run
// (idemgen ./...), binding the flags gen.Flags says a package run takes and
// refusing the others with where they belong. A code of 0 or more ends the
// run with that status.
func parsePackageRun(args []string, stdout, stderr io.Writer) (options, int) {
	var o options
	fs := flag.NewFlagSet("idemgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // -help prints the usage to stdout, below
	bools := map[string]*bool{"check": &o.check, "v": &o.verbose, "q": &o.quiet, "debug-model": &o.debugModel}
	for _, f := range gen.Flags() {
		switch {
		case f.Where&gen.InPackageRun == 0:
			fs.Func(f.Name, "", directiveOnly(f.Name))
		case f.Name == "tags":
			fs.StringVar(&o.cfg.Tags, f.Name, "", "")
		case bools[f.Name] != nil:
			fs.BoolVar(bools[f.Name], f.Name, false, "")
		default:
			fmt.Fprintf(stderr, "idemgen: flag -%s has no binding in package runs\n", f.Name)
			return o, 1
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return o, 0
		}
		fmt.Fprint(stderr, "run idemgen -help for usage\n")
		return o, 2
	}
	o.cfg.Patterns = fs.Args()
	if len(o.cfg.Patterns) == 0 {
		fmt.Fprint(stderr, "idemgen: no packages given and $GOFILE is not set: run it from a //go:generate directive or name packages, e.g. idemgen ./...\n\n")
		fmt.Fprint(stderr, usage)
		return o, 2
	}
	return o, -1
}

// directiveOnly refuses a directive's flag on a package run's command
// line, checking its value first so both problems are said at once.
func directiveOnly(name string) func(string) error {
	return func(v string) error {
		const where = "belongs in a //go:generate idemgen directive in the method's doc comment, not on the command line of a package run"
		if _, problems := gen.ParseDirectiveArgs([]string{"-" + name + "=" + v}); len(problems) > 0 {
			return fmt.Errorf("%s; and the flag %s", strings.Join(problems, "; "), where)
		}
		return errors.New(where)
	}
}

// generate runs the generator as o asks and writes, checks or prints what
// it returns.
func generate(ctx context.Context, o options, wd string, stdout, stderr io.Writer) int {
	cfg := o.cfg
	check, verbose, quiet, debugModel := o.check, o.verbose, o.quiet, o.debugModel
	cfg.Force = check || debugModel

	out, err := gen.Generate(ctx, cfg)
	var problems *migrations.ProblemError
	if errors.As(err, &problems) {
		reportProblems(problems, check, stdout, stderr)
		return 1
	}
	var list gen.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	if debugModel {
		// The model as the goldens keep it (model.json): paths relative to
		// the directory idemgen runs in.
		b, err := gen.ModelJSON(out.Packages, wd)
		if err == nil {
			_, err = stdout.Write(b)
		}
		if err != nil {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
			return 1
		}
		return 0
	}
	if out.Unchanged {
		if verbose {
			fmt.Fprint(stderr, fastpath.Unchanged(cfg.GoFile))
		}
		return 0
	}
	if verbose {
		fmt.Fprintf(stderr, "idemgen: type-checked in %d load(s); %d package(s) have directives\n", out.Loads, len(out.Packages))
	}
	paths := make([]string, 0, len(out.Files))
	for p := range out.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if check {
		return checkFiles(wd, paths, out, stdout, stderr)
	}
	return write(wd, paths, out, verbose, quiet, stdout, stderr)
}

// write writes every output whose bytes changed (removing those now nil),
// saying what it did as -v and -q ask.
func write(wd string, paths []string, out *gen.Output, verbose, quiet bool, stdout, stderr io.Writer) int {
	if !quiet {
		notes(stderr, wd, out.Packages)
	}
	written := map[string][]string{} // package directory → files written or removed
	for _, p := range paths {
		changed, err := gen.WriteFile(p, out.Files[p])
		if err != nil {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
			return 1
		}
		if changed {
			dir := packageDir(out.Packages, p)
			name := rel(dir, p)
			if out.Files[p] == nil {
				name += " (removed)"
			}
			written[dir] = append(written[dir], name)
		}
		if verbose {
			state := "unchanged"
			switch {
			case changed && out.Files[p] == nil:
				state = "removed"
			case changed:
				state = "wrote"
			}
			fmt.Fprintf(stderr, "idemgen: %s %s\n", state, rel(wd, p))
		}
	}
	if !quiet {
		summarise(stdout, wd, out.Packages, written)
	}
	return 0
}

// packageDir returns the directory of the package whose output p is: the
// innermost package directory holding it, or p's own directory.
func packageDir(pkgs []*gen.Package, p string) string {
	best := ""
	for _, pkg := range pkgs {
		if strings.HasPrefix(p, pkg.Dir+string(filepath.Separator)) && len(pkg.Dir) > len(best) {
			best = pkg.Dir
		}
	}
	if best == "" {
		return filepath.Dir(p)
	}
	return best
}

// summarise prints one line per package whose output changed: its
// import path (or directory), the files written and how many methods they
// serve, e.g.
//
//	idemgen: example.com/shop/payments: wrote idem_gen.go, idem_gen_test.go, migrations/00001_idemgen_create_idempotency_keys.sql (2 methods)
func summarise(w io.Writer, wd string, pkgs []*gen.Package, written map[string][]string) {
	dirs := make([]string, 0, len(written))
	for d := range written {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		methods := 0
		name := rel(wd, d)
		if !strings.HasPrefix(name, ".") {
			name = "./" + name
		}
		for _, pkg := range pkgs {
			if pkg.Dir == d {
				name = pkg.Path
				for _, r := range pkg.Receivers {
					methods += len(r.Methods)
				}
			}
		}
		plural := "s"
		if methods == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "idemgen: %s: wrote %s (%d method%s)\n", name, strings.Join(written[d], ", "), methods, plural)
	}
}

// checkFiles prints a unified diff for every output that differs from disk,
// and names a missing one.
func checkFiles(wd string, paths []string, out *gen.Output, stdout, stderr io.Writer) int {
	files := out.Files
	stale := 0
	for _, p := range paths {
		have, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
			return 1
		}
		missing := err != nil
		want := files[p]
		if want == nil && missing {
			continue
		}
		name := rel(wd, p)
		if missing && want != nil {
			how := ""
			if isMigration(out.Packages, p) {
				how = " under its own name, as idemgen wrote it"
			}
			fmt.Fprintf(stdout, "%s: missing: run go generate to write it back%s\n", name, how)
			stale++
			continue
		}
		if d := gen.UnifiedDiff("a/"+name, "b/"+name, gen.WithoutInputsStamp(have), gen.WithoutInputsStamp(want)); d != "" {
			fmt.Fprint(stdout, d)
			stale++
		}
	}
	if stale > 0 {
		fmt.Fprintf(stderr, "idemgen: %d generated file(s) are stale or hand-edited; run go generate ./... and commit the result\n", stale)
		return 1
	}
	return 0
}

// isMigration reports whether p is in the migrations directory of one of
// pkgs.
func isMigration(pkgs []*gen.Package, p string) bool {
	for _, pkg := range pkgs {
		if pkg.MigrationsDir != "" && filepath.Dir(p) == filepath.Join(pkg.Dir, filepath.FromSlash(pkg.MigrationsDir)) {
			return true
		}
	}
	return false
}

// reportProblems prints why the migrations directory was refused, one
// message per file; under -check each hand-edited file is followed by a
// unified diff turning it back into what idemgen wrote.
func reportProblems(e *migrations.ProblemError, check bool, stdout, stderr io.Writer) {
	for _, p := range e.Problems {
		fmt.Fprintln(stderr, p.Message(e.Dir))
		if check && p.Kind == migrations.Edited && p.Want != nil {
			name := path.Join(e.Dir, p.File)
			fmt.Fprint(stdout, gen.UnifiedDiff("a/"+name+" (hand-edited)", "b/"+name+" (as idemgen wrote it)", p.Have, p.Want))
		}
	}
}

func rel(wd, p string) string {
	if r, err := filepath.Rel(wd, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// hasPositional reports whether args name packages.
func hasPositional(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return true
		}
	}
	return false
}

// withoutRunFlags takes -check and -q out of a directive's arguments.
func withoutRunFlags(args []string, check, quiet *bool) []string {
	var out []string
	for _, a := range args {
		switch a {
		case "-check", "--check":
			*check = true
			continue
		case "-q", "--q":
			*quiet = true
			continue
		}
		out = append(out, a)
	}
	return out
}

// notes prints, at each directive, what the generated tests of its method
// leave out and why (gen.NoMismatch), and once per package which
// optional effect-count fixtures would make them count effects too.
func notes(w io.Writer, wd string, pkgs []*gen.Package) {
	rel := func(pos string) string { return strings.TrimPrefix(pos, wd+string(filepath.Separator)) }
	for _, p := range pkgs {
		if !p.Tests {
			continue
		}
		var pos string
		var missing []string
		var inline bool
		for _, r := range p.Receivers {
			for _, m := range r.Methods {
				if n := gen.NoMismatch(p, m); n != "" {
					fmt.Fprintf(w, "%s: note: %s\n", rel(m.Pos), n)
				}
				if !m.HasEffectFixture {
					if pos == "" {
						pos = m.Pos
					}
					inline = inline || m.Mode == gen.ModeInline
					missing = append(missing, gen.EffectFixtureDecl(m))
				}
			}
		}
		if len(missing) > 0 {
			what := "rows, calls to a fake"
			if inline {
				what += "; for an inline method, what it does beyond its keyed row"
			}
			fmt.Fprintf(w, "%s: hint: the generated tests count executions; to count each method's effects too (%s), add to a _test.go file of package %s\n\t%s\n",
				rel(pos), what, p.Name, strings.Join(missing, "\n\t"))
		}
	}
}
