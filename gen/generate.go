package gen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/effects"
	"github.com/idemgen/idemgen/gen/internal/load"
	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/gen/stamp"
)

// Version identifies the generator's output format. It is part of the
// generator identity in the input stamp, so a new generator regenerates
// everything once.
const Version = stamp.Version

// Output file names, beside the package's sources. GoFile carries the stamp.
const (
	GoFile   = stamp.GoFile
	TestFile = "idem_gen_test.go"
)

// Config is one run of the generator.
type Config struct {
	// Dir is the directory patterns are relative to (and error positions
	// are printed relative to).
	Dir string
	// Patterns are package patterns such as ./...; empty means ".".
	Patterns []string
	// Tags are build tags, passed to the go command as -tags.
	Tags string
	// GoFile is set when idemgen runs as a go generate directive ($GOFILE):
	// the package in Dir is generated, and when its stamped inputs and
	// outputs are unchanged nothing is loaded at all.
	GoFile string
	// Force disables that shortcut (-check, -debug-model).
	Force bool
}

// Output is what a run produced.
type Output struct {
	// Files maps absolute paths to the bytes they must hold; a nil value
	// means the file must not exist (stale output of a package that no
	// longer has directives).
	Files map[string][]byte
	// Packages are the models built, for -debug-model.
	Packages []*Package
	// Loads counts type-checking package loads (0 when the stamp matched).
	Loads int
	// Unchanged is true when the stamp showed nothing to do.
	Unchanged bool
}

// Generate runs the generator in memory: load → model → emit. Writing,
// -check and tests all use it. A problem in the user's code is returned as
// an ErrorList with positions relative to cfg.Dir.
func Generate(ctx context.Context, cfg Config) (*Output, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	if cfg.GoFile != "" && !cfg.Force {
		if ok, err := stamp.Matches(dir); err == nil && ok {
			return &Output{Files: map[string][]byte{}, Unchanged: true}, nil
		}
	}
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	pkgs, err := load.Load(ctx, dir, patterns, cfg.Tags)
	var list ErrorList
	if errors.As(err, &list) {
		return nil, list.Relative(dir)
	}
	if err != nil {
		return nil, err
	}
	out := &Output{Files: map[string][]byte{}, Loads: pkgs[0].Loads}
	var all ErrorList
	loaded := map[string]*load.Package{}
	for _, l := range pkgs {
		loaded[l.Pkg.PkgPath] = l
		if l.Problem != nil {
			all = append(all, l.Problem)
			continue
		}
		m, el := build(l)
		if len(el) > 0 {
			all = append(all, el...)
			continue
		}
		if m == nil {
			markStale(l, out.Files)
			continue
		}
		out.Packages = append(out.Packages, m)
	}
	all = append(all, checkLedgerNames(out.Packages)...)
	if len(all) == 0 {
		el, err := emitChecked(ctx, cfg, loaded, out.Packages, out.Files)
		if err != nil {
			return nil, err
		}
		all = append(all, el...)
	}
	if len(all) > 0 {
		return out, all.Relative(dir)
	}
	return out, nil
}

// markStale removes the output of a package that no longer has directives.
func markStale(l *load.Package, files map[string][]byte) {
	for _, name := range append(append([]string{}, l.Pkg.GoFiles...), testFiles(l)...) {
		base := filepath.Base(name)
		if base != GoFile && base != TestFile {
			continue
		}
		if src, err := os.ReadFile(name); err == nil && stamp.IsGenerated(src) {
			files[name] = nil
		}
	}
}

func testFiles(l *load.Package) []string {
	if l.Test == nil {
		return nil
	}
	return l.Test.GoFiles
}

// emitChecked emits every package of models into files, with the effect
// stage between: it loads the program as it will be once the outputs are
// written, so every output is rendered first; the effects it allows go
// into the wrappers' doc comments, so only the wrappers file of a package
// with allowed effects is rendered again (its other outputs, its
// migrations and its stamp's inputs are not).
func emitChecked(ctx context.Context, cfg Config, loaded map[string]*load.Package, models []*Package, files map[string][]byte) (ErrorList, error) {
	var pkgs []*emitted
	written := map[string][]byte{} // the outputs as the effect check loads them
	for _, m := range models {
		em, err := emitPackage(cfg, m, files)
		if err != nil {
			return nil, err
		}
		em.writeTo(written)
		pkgs = append(pkgs, em)
	}
	el, err := effects.Check(ctx, cfg.Dir, loaded, models, written)
	if err != nil {
		return nil, err
	}
	for _, em := range pkgs {
		if len(el) == 0 && effects.HasEffects(em.m) {
			if em.unstamped, err = newEmitter(em.m).emitGo(); err != nil {
				return nil, err
			}
		}
		em.writeTo(files)
	}
	return el, nil
}

// emitted is one package's outputs: the wrappers file unstamped, the
// others by path relative to the package, and the inputs' hash its stamp
// carries.
type emitted struct {
	m         *Package
	unstamped []byte
	outputs   map[string][]byte
	inputs    string
}

// writeTo puts the package's outputs into files, by absolute path, the
// wrappers file with its stamp: the inputs' hash and the hash of every
// output (itself without the stamp included).
func (em *emitted) writeTo(files map[string][]byte) {
	files[filepath.Join(em.m.Dir, GoFile)] = stamp.Apply(em.unstamped, em.inputs, em.outputs)
	for rel, b := range em.outputs {
		files[filepath.Join(em.m.Dir, filepath.FromSlash(rel))] = b
	}
}

// emitPackage renders every output of one package; a generated tests file
// the package no longer has is marked for removal in files.
func emitPackage(cfg Config, m *Package, files map[string][]byte) (*emitted, error) {
	e := newEmitter(m)
	outputs := map[string][]byte{} // relative to m.Dir
	if m.MigrationsDir != "" {
		if err := planMigrations(cfg, m, outputs); err != nil {
			return nil, err
		}
	}
	if m.Tests {
		src, err := e.emitTests(testMigrations(m.MigrationsDir, outputs))
		if err != nil {
			return nil, err
		}
		outputs[TestFile] = src
	} else if src, err := os.ReadFile(filepath.Join(m.Dir, TestFile)); err == nil && stamp.IsGenerated(src) {
		files[filepath.Join(m.Dir, TestFile)] = nil
	}
	inputs, err := stamp.Inputs(m.Dir)
	if err != nil {
		return nil, err
	}
	unstamped, err := e.emitGo()
	if err != nil {
		return nil, err
	}
	return &emitted{m: m, unstamped: unstamped, outputs: outputs, inputs: inputs}, nil
}

// writtenMigrations returns the migrations the last run wrote, by name in
// the migrations directory, with their sums, as the stamp of the package's
// wrappers file lists them; nil when there is no stamp.
func writtenMigrations(m *Package) map[string]string {
	src, err := os.ReadFile(filepath.Join(m.Dir, GoFile))
	if err != nil {
		return nil
	}
	prefix := filepath.ToSlash(filepath.Clean(m.MigrationsDir)) + "/"
	out := map[string]string{}
	for name, sum := range stamp.Written(src) {
		if rest, ok := strings.CutPrefix(name, prefix); ok && !strings.Contains(rest, "/") {
			out[rest] = sum
		}
	}
	return out
}

// relPath returns p relative to dir, slash-separated, or p when it is not
// below dir.
func relPath(dir, p string) string {
	if r, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return filepath.ToSlash(p)
}

// WriteFile makes path hold b (or removes it when b is nil), writing only
// when the bytes differ so mtimes and the build cache survive. It reports
// whether anything changed.
func WriteFile(path string, b []byte) (bool, error) {
	have, err := os.ReadFile(path)
	if b == nil {
		if err != nil {
			return false, nil
		}
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("remove stale output: %w", err)
		}
		return true, nil
	}
	if err == nil && string(have) == string(b) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("create output directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".idemgen-*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return true, nil
}

// WithoutInputsStamp returns src with the value of its inputs-stamp line
// blanked: -check compares generated files this way (see
// stamp.WithoutInputs).
func WithoutInputsStamp(src []byte) []byte {
	return stamp.WithoutInputs(src)
}

// planMigrations adds the package's migrations, existing and new, to
// outputs (keyed by path relative to the package). What the last run wrote
// (the stamp's list) lets Plan write a deleted migration back and refuse a
// hand-edited one; a refusal names files relative to cfg.Dir.
func planMigrations(cfg Config, m *Package, outputs map[string][]byte) error {
	mdir := filepath.Join(m.Dir, filepath.FromSlash(m.MigrationsDir))
	existing, err := migrations.ReadDir(os.DirFS(mdir), ".")
	if err != nil {
		return err
	}
	var methods []string
	for _, r := range m.Receivers {
		for _, meth := range r.Methods {
			if meth.Inline == nil {
				methods = append(methods, meth.Key)
			}
		}
	}
	// A package whose methods are all inline needs no ledger table.
	planned, err := migrations.Plan(migrations.Config{Format: m.MigrationFormat, Table: m.Table, Methods: methods,
		Distributed: m.Distributed, Inline: inlineTables(m), NoLedger: len(methods) == 0, Written: writtenMigrations(m)}, existing)
	var problems *migrations.ProblemError
	if errors.As(err, &problems) {
		problems.Dir = relPath(cfg.Dir, mdir)
	}
	if err != nil {
		return fmt.Errorf("plan migrations for %s: %w", m.Path, err)
	}
	for name, src := range planned {
		outputs[filepath.ToSlash(filepath.Join(m.MigrationsDir, name))] = src
	}
	return nil
}
