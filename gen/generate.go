package gen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/gen/migrations"
)

// Version identifies the generator's output format. It is mixed into the
// input stamp, so a new generator regenerates everything once.
const Version = "idemgen/1"

// Output file names, beside the package's sources.
const (
	GoFile   = "idem_gen.go"
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
		if ok, err := stampMatches(dir); err == nil && ok {
			return &Output{Files: map[string][]byte{}, Unchanged: true}, nil
		}
	}
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	pkgs, err := load(ctx, dir, patterns, cfg.Tags)
	if err != nil {
		return nil, err
	}
	out := &Output{Files: map[string][]byte{}, Loads: 1}
	var all ErrorList
	for _, l := range pkgs {
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
		if err := emitPackage(cfg, m, out.Files); err != nil {
			return nil, err
		}
	}
	if len(all) > 0 {
		return out, all.Relative(dir)
	}
	return out, nil
}

// markStale removes the output of a package that no longer has directives.
func markStale(l *loaded, files map[string][]byte) {
	for _, name := range append(append([]string{}, l.pkg.GoFiles...), testFiles(l)...) {
		base := filepath.Base(name)
		if base != GoFile && base != TestFile {
			continue
		}
		if src, err := os.ReadFile(name); err == nil && isOurs(src) {
			files[name] = nil
		}
	}
}

func testFiles(l *loaded) []string {
	if l.test == nil {
		return nil
	}
	return l.test.GoFiles
}

// emitPackage renders every output of one package into files.
func emitPackage(cfg Config, m *Package, files map[string][]byte) error {
	e := newEmitter(m)
	outputs := map[string][]byte{} // relative to m.Dir
	if m.Tests {
		src, err := e.emitTests()
		if err != nil {
			return err
		}
		outputs[TestFile] = src
	} else if src, err := os.ReadFile(filepath.Join(m.Dir, TestFile)); err == nil && isOurs(src) {
		files[filepath.Join(m.Dir, TestFile)] = nil
	}
	if m.MigrationsDir != "" {
		mdir := filepath.Join(m.Dir, filepath.FromSlash(m.MigrationsDir))
		existing, err := migrations.ReadDir(os.DirFS(mdir), ".")
		if err != nil {
			return err
		}
		var methods []string
		for _, r := range m.Receivers {
			for _, meth := range r.Methods {
				methods = append(methods, meth.Key)
			}
		}
		planned, err := migrations.Plan(migrations.Config{Format: m.MigrationFormat, Table: m.Table, Methods: methods}, existing)
		if err != nil {
			return fmt.Errorf("plan migrations for %s: %w", m.Path, err)
		}
		for name, src := range planned {
			outputs[filepath.ToSlash(filepath.Join(m.MigrationsDir, name))] = src
		}
	}
	inputs, err := inputsHash(m.Dir)
	if err != nil {
		return err
	}
	// The wrappers file carries the stamp: the inputs' hash and the hash of
	// every output (itself without the stamp included).
	unstamped, err := e.emitGo(nil)
	if err != nil {
		return err
	}
	stamp := stampLines(inputs, outputsHash(unstamped, outputs), outputs)
	src, err := e.emitGo(stamp)
	if err != nil {
		return err
	}
	files[filepath.Join(m.Dir, GoFile)] = src
	for rel, b := range outputs {
		files[filepath.Join(m.Dir, filepath.FromSlash(rel))] = b
	}
	return nil
}

const (
	stampInputs  = "// idemgen-inputs: "
	stampOutputs = "// idemgen-outputs: "
)

func stampLines(inputs, outputs string, files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return []string{
		strings.TrimPrefix(stampInputs, "// ") + inputs,
		strings.TrimPrefix(stampOutputs, "// ") + outputs + " " + strings.Join(names, " "),
	}
}

// inputsHash hashes what the outputs are generated from without loading
// anything: the package directory's Go sources (the files idemgen wrote
// excluded), the sources of the packages of the same module they import
// directly (request and response types often live there), the nearest
// go.mod and the generator's version. Build tags are not part of it: they
// are written in the directives, which are in the sources, and a package
// run (-check) must compute the same stamp as the directive that wrote it. A change deeper in
// the import graph is not seen here; -check, which always loads, and the
// compile-time guards in the output catch it.
func inputsHash(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", generatorID())
	imports, err := hashGoFiles(h, dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			h.Write(b)
			modPath := modfileModule(b)
			deps := make([]string, 0, len(imports))
			for imp := range imports {
				if modPath != "" && (imp == modPath || strings.HasPrefix(imp, modPath+"/")) {
					deps = append(deps, imp)
				}
			}
			sort.Strings(deps)
			for _, imp := range deps {
				sub := filepath.Join(d, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(imp, modPath), "/")))
				if sub == dir {
					continue
				}
				fmt.Fprintf(h, "import\x00%s\x00", imp)
				if _, err := hashGoFiles(h, sub); err != nil && !errors.Is(err, os.ErrNotExist) {
					return "", err
				}
			}
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// hashGoFiles writes the names and contents of dir's Go files (not the ones
// idemgen wrote) into h, and returns the import paths they use.
func hashGoFiles(h io.Writer, dir string) (map[string]bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read package directory: %w", err)
	}
	imports := map[string]bool{}
	for _, e := range ents { // sorted by name
		if !strings.HasSuffix(e.Name(), ".go") || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read source: %w", err)
		}
		if isOurs(b) {
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
		if f, err := parser.ParseFile(token.NewFileSet(), e.Name(), b, parser.ImportsOnly); err == nil {
			for _, imp := range f.Imports {
				if p, err := strconv.Unquote(imp.Path.Value); err == nil {
					imports[p] = true
				}
			}
		}
	}
	return imports, nil
}

// modfileModule returns the module path declared in a go.mod.
func modfileModule(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// outputsHash hashes the unstamped wrappers file and every other output.
func outputsHash(unstamped []byte, files map[string][]byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", GoFile, len(unstamped))
	h.Write(unstamped)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// stampMatches reports whether the package in dir was generated from its
// current inputs and its outputs are untouched, reading files only.
func stampMatches(dir string) (bool, error) {
	src, err := os.ReadFile(filepath.Join(dir, GoFile))
	if err != nil || !isOurs(src) {
		return false, err
	}
	var inputs, outputs string
	var unstamped strings.Builder
	for _, line := range strings.SplitAfter(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, stampInputs):
			inputs = strings.TrimSpace(strings.TrimPrefix(line, stampInputs))
		case strings.HasPrefix(line, stampOutputs):
			outputs = strings.TrimSpace(strings.TrimPrefix(line, stampOutputs))
		default:
			unstamped.WriteString(line)
		}
	}
	fields := strings.Fields(outputs)
	if inputs == "" || len(fields) == 0 {
		return false, nil
	}
	in, err := inputsHash(dir)
	if err != nil || in != inputs {
		return false, err
	}
	files := map[string][]byte{}
	for _, rel := range fields[1:] {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return false, nil
		}
		files[rel] = b
	}
	return outputsHash([]byte(unstamped.String()), files) == fields[0], nil
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
// blanked. -check compares outputs this way: the inputs hash is a cache key
// that lets later directives skip loading, not generated content, so a change
// that leaves every generated byte the same (a new dependency in go.mod, a
// comment edit) is not stale output. The next go generate refreshes the
// stamp with one load.
func WithoutInputsStamp(src []byte) []byte {
	if !isOurs(src) {
		return src
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("package ")) {
			break // the stamp sits in the header, above the package clause
		}
		if bytes.HasPrefix(l, []byte(stampInputs)) {
			lines[i] = []byte(stampInputs + "…\n")
			break
		}
	}
	return bytes.Join(lines, nil)
}
