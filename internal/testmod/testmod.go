// Package testmod writes throwaway Go modules that use this repository, for
// the generator's golden and end-to-end tests.
package testmod

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// RepoRoot returns the repository's root directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testmod: cannot locate the repository")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

var requireRE = regexp.MustCompile(`(?ms)^require (\(.*?^\)|[^\n]*)`)

// New writes files (slash-separated names) into a fresh module
// example.com/<name> that requires this repository through a replace
// directive, with the repository's requirements and go.sum, so building it
// needs no network. It returns the module's directory.
func New(t testing.TB, name string, files map[string][]byte) string {
	t.Helper()
	root := RepoRoot(t)
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("testmod: %v", err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatalf("testmod: %v", err)
	}
	mod := "module example.com/" + name + "\n\ngo 1.26.8\n\nrequire github.com/idemgen/idemgen v0.0.0\n\n" +
		strings.Join(requireRE.FindAllString(string(gomod), -1), "\n\n") +
		"\n\nreplace github.com/idemgen/idemgen => " + root + "\n"
	all := map[string][]byte{"go.mod": []byte(mod), "go.sum": sum}
	for n, b := range files {
		all[n] = b
	}
	for n, b := range all {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("testmod: %v", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatalf("testmod: %v", err)
		}
	}
	return dir
}

// ExampleFiles returns the example package of this repository, its Go
// sources and its migrations, as files under example/ for New.
func ExampleFiles(t testing.TB) map[string][]byte {
	t.Helper()
	src := filepath.Join(RepoRoot(t), "example")
	files := map[string][]byte{}
	for _, pattern := range []string{"*.go", "migrations/*.sql"} {
		names, err := filepath.Glob(filepath.Join(src, pattern))
		if err != nil {
			t.Fatalf("testmod: %v", err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatalf("testmod: %v", err)
			}
			r, err := filepath.Rel(src, n)
			if err != nil {
				t.Fatalf("testmod: %v", err)
			}
			files["example/"+filepath.ToSlash(r)] = b
		}
	}
	return files
}
