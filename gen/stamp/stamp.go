// Package stamp decides, by reading files only, whether a package's
// generated output is current, so that a go:generate directive whose
// package is up to date exits without type-checking anything.
//
// The wrappers file idemgen writes carries two lines in its header:
//
//	// idemgen-inputs: sha256:…   what the outputs were generated from
//	// idemgen-outputs: sha256:… FILE@SUM …   the outputs, as written
//
// The inputs hash covers the generator's identity, the package directory's
// Go sources (idemgen's own files excluded), the sources of the same-module
// packages they import directly and the nearest go.mod. The outputs hash
// covers the wrappers file without these two lines and every other output
// listed. Any change to either means the package is generated again.
//
// Each listed file carries its own sum (FileSum, after an @): the record of
// what idemgen wrote there. A migration whose bytes no longer have that sum
// was edited by hand, and one that is listed but absent was deleted; the
// generator reads the list back with Written to tell the two apart from a
// file it never wrote. A stamp written before the sums were recorded lists
// bare names.
//
// The package depends on the standard library and on idemgen's stdlib-only
// packages alone: cmd/idemgen runs Matches before the type checker's
// packages are even initialised.
package stamp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/internal/genheader"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/templates"
)

// Version identifies the generator's output format. It is part of the
// generator's identity, so a new format regenerates everything once.
const Version = "idemgen/1"

// Header is the first line of every Go file idemgen writes (package
// genheader, a leaf the analyzers read it from too).
const Header = genheader.Header

// GoFile is the wrappers file, which carries the stamp.
const GoFile = "idem_gen.go"

const (
	inputsPrefix  = "// idemgen-inputs: "
	outputsPrefix = "// idemgen-outputs: "
)

// IsGenerated reports whether src is a Go file idemgen wrote.
func IsGenerated(src []byte) bool { return genheader.IsGenerated(src) }

// GeneratorID identifies the generator: the output format version, the
// generator's sources (tests excluded), the migration templates and the
// ledger schema the migrations are rendered from. It is the same for every
// build of the same code and changes whenever the generator does.
func GeneratorID() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", Version)
	buf := make([]byte, 32<<10)
	hashFS := func(fsys fs.FS) {
		_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := fsys.Open(path)
			if err != nil {
				return nil
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return nil
			}
			entry(h, path, info.Size())
			_, _ = io.CopyBuffer(h, f, buf)
			return nil
		})
	}
	hashFS(idemgen.GeneratorSources)
	hashFS(templates.FS)
	if l, err := ledger.New(ledger.DefaultTable); err == nil {
		fmt.Fprintf(h, "%s\x00", strings.Join(l.DDL(), "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Apply returns the wrappers file unstamped with its stamp: the inputs hash
// and the hash of every output (unstamped itself and files, the other
// outputs by path relative to the package directory), as two comment lines
// after its first line, the generated-code header.
func Apply(unstamped []byte, inputs string, files map[string][]byte) []byte {
	i := bytes.IndexByte(unstamped, '\n') + 1
	out := make([]byte, 0, len(unstamped)+256)
	out = append(out, unstamped[:i]...)
	out = append(out, inputsPrefix+inputs+"\n"...)
	fields := []string{Outputs(unstamped, files)}
	for _, name := range sortedNames(files) {
		fields = append(fields, name+"@"+FileSum(files[name]))
	}
	out = append(out, outputsPrefix+strings.Join(fields, " ")+"\n"...)
	return append(out, unstamped[i:]...)
}

// Inputs hashes what the outputs of the package in dir are generated from,
// without loading anything: the generator's identity, the directory's Go
// sources (the files idemgen wrote excluded), the sources of the packages
// of the same module they import directly (request and response types often
// live there), and the nearest go.mod. Build tags are not part of it: they
// are written in the directives, which are in the sources, and a package
// run (-check) must compute the same stamp as the directive that wrote it.
// A change deeper in the import graph is not seen here; -check, which always
// loads, and the compile-time guards in the output catch it.
func Inputs(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", GeneratorID())
	imports, err := hashGoFiles(h, dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			h.Write(b)
			modPath := modulePath(b)
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
		if IsGenerated(b) {
			continue
		}
		entry(h, e.Name(), int64(len(b)))
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

// modulePath returns the module path declared in a go.mod.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Outputs hashes the wrappers file without its stamp lines (unstamped) and
// every other output, by path relative to the package directory.
func Outputs(unstamped []byte, files map[string][]byte) string {
	h := sha256.New()
	entry(h, GoFile, int64(len(unstamped)))
	h.Write(unstamped)
	for _, name := range sortedNames(files) {
		entry(h, name, int64(len(files[name])))
		h.Write(files[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// headerMax bounds the part of the wrappers file read to find the stamp,
// which sits in the first lines; a file whose stamp is not within it is
// generated again.
const headerMax = 16 << 10

// Matches reports whether the package in dir was generated from its current
// inputs and its outputs are untouched, reading files only. An error means
// the stamp could not be checked; callers generate in that case, as they do
// when it does not match.
//
// It computes the same hashes as Apply and Outputs, streaming the files
// through one buffer: a directive whose package is current runs it in a
// fresh process, where every page of memory touched costs a fault.
func Matches(dir string) (bool, error) {
	f, err := os.Open(filepath.Join(dir, GoFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read stamp: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("read stamp: %w", err)
	}
	buf := make([]byte, 32<<10)
	n, err := io.ReadFull(f, buf[:headerMax])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read stamp: %w", err)
	}
	head := buf[:n]
	if !IsGenerated(head) {
		return false, nil
	}
	// Apply put the two stamp lines right after the header line.
	i := len(Header) + 1
	j := i + bytes.IndexByte(head[i:], '\n') + 1
	if j <= i || !bytes.HasPrefix(head[i:], []byte(inputsPrefix)) {
		return false, nil
	}
	k := j + bytes.IndexByte(head[j:], '\n') + 1
	if k <= j || !bytes.HasPrefix(head[j:], []byte(outputsPrefix)) {
		return false, nil
	}
	inputs := string(bytes.TrimSpace(head[i+len(inputsPrefix) : j]))
	fields := strings.Fields(string(head[j+len(outputsPrefix) : k]))
	if inputs == "" || len(fields) == 0 {
		return false, nil
	}
	if in, err := Inputs(dir); err != nil || in != inputs {
		return false, err
	}
	h := sha256.New()
	entry(h, GoFile, info.Size()-int64(k-i))
	h.Write(head[:i])
	h.Write(head[k:])
	if _, err := io.CopyBuffer(h, f, buf); err != nil {
		return false, fmt.Errorf("read stamp: %w", err)
	}
	names := make([]string, len(fields)-1)
	for i, f := range fields[1:] {
		names[i], _, _ = strings.Cut(f, "@")
	}
	sort.Strings(names)
	for _, rel := range names {
		ok, err := hashFile(h, filepath.Join(dir, filepath.FromSlash(rel)), rel, buf)
		if err != nil || !ok {
			return false, err
		}
	}
	return "sha256:"+hex.EncodeToString(h.Sum(nil)) == fields[0], nil
}

// hashFile writes name, the size and the contents of the file at path into
// h, as Outputs does for an output in memory. A missing file is reported as
// false, not as an error: it is an output to write again.
func hashFile(h io.Writer, path, name string, buf []byte) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read output: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("read output: %w", err)
	}
	if !info.Mode().IsRegular() {
		return false, nil
	}
	entry(h, name, info.Size())
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return false, fmt.Errorf("read output: %w", err)
	}
	return n == info.Size(), nil
}

// WithoutInputs returns src with the value of its inputs-stamp line
// blanked. -check compares outputs this way: the inputs hash is a cache key
// that lets later directives skip loading, not generated content, so a
// change that leaves every generated byte the same (a new dependency in
// go.mod, a comment edit) is not stale output. The next go generate
// refreshes the stamp with one load.
func WithoutInputs(src []byte) []byte {
	if !IsGenerated(src) {
		return src
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("package ")) {
			break // the stamp sits in the header, above the package clause
		}
		if bytes.HasPrefix(l, []byte(inputsPrefix)) {
			lines[i] = []byte(inputsPrefix + "…\n")
			break
		}
	}
	return bytes.Join(lines, nil)
}

// FileSum is the sum the stamp records for one output: the first 16 hex
// digits of its SHA-256, enough to tell an edited file from the one written.
func FileSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// Written returns the outputs the stamp of a wrappers file lists, by path
// relative to the package directory, each with the FileSum recorded when it
// was written ("" in a stamp older than the sums). It returns nil when src
// is not a wrappers file idemgen wrote or carries no stamp.
func Written(src []byte) map[string]string {
	if !IsGenerated(src) {
		return nil
	}
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "package ") {
			return nil
		}
		rest, ok := strings.CutPrefix(l, outputsPrefix)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil
		}
		out := make(map[string]string, len(fields)-1)
		for _, f := range fields[1:] {
			name, sum, _ := strings.Cut(f, "@")
			out[name] = sum
		}
		return out
	}
	return nil
}

// entry writes the header every hashed file starts with: its name and size.
// Outputs (files in memory) and Matches (files on disk) must agree on it.
func entry(h io.Writer, name string, size int64) {
	fmt.Fprintf(h, "%s\x00%d\x00", name, size)
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
