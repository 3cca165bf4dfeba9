package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testmod"
)

// BenchmarkGoGenerate times `go generate ./...` on a package with 1, 10 and
// 50 annotated methods after a source change, and counts type-checking
// package loads per run (loads/op): the first directive loads once and
// writes every output; the others see the stamp and exit without loading.
// Its methods are minimal (external mode, a string and an int);
// BenchmarkGoGenerateAtomic has the usual shape, a pgx.Tx and request and
// response structs, so pgx is part of every load.
//
// BenchmarkGoGenerateFloor is the same package with every directive
// running `true` instead, and BenchmarkGoGenerateFloorGo with every
// directive running an empty Go program: what go generate itself costs to
// start 1, 10 and 50 processes, and what any tool written in Go costs on
// top, the part of the figures idemgen cannot remove. The LowerBound
// benchmarks put the two together: idemgen for the first directive, the
// empty program for the others.
//
//	go test ./cmd/idemgen -run '^$' -bench GoGenerate -benchtime 5x
func BenchmarkGoGenerate(b *testing.B) {
	benchGenerate(b, minimalMethod, false)
}

// BenchmarkGoGenerateAtomic is BenchmarkGoGenerate with atomic methods.
func BenchmarkGoGenerateAtomic(b *testing.B) {
	benchGenerate(b, atomicMethod, false)
}

// BenchmarkGoGenerateLowerBound and BenchmarkGoGenerateAtomicLowerBound
// run idemgen for the first directive only and an empty Go program for
// every other: the least that any generator written in Go, started once per
// directive as go generate does, could cost on this machine.
func BenchmarkGoGenerateLowerBound(b *testing.B) {
	benchGenerate(b, minimalMethod, true)
}

// BenchmarkGoGenerateAtomicLowerBound: see BenchmarkGoGenerateLowerBound.
func BenchmarkGoGenerateAtomicLowerBound(b *testing.B) {
	benchGenerate(b, atomicMethod, true)
}

const (
	minimalHeader = "package svc\n\nimport \"context\"\n\n// Svc is a service.\ntype Svc struct{}\n"
	minimalMethod = "\n// M%[1]d is method %[1]d.\n//\n//go:generate %[2]s\nfunc (s *Svc) M%[1]d(ctx context.Context, id string, n int) error { return nil }\n"
	atomicHeader  = "package svc\n\nimport (\n\t\"context\"\n\n\t\"github.com/jackc/pgx/v5\"\n)\n\n" +
		"// Req is a request.\ntype Req struct {\n\tAccount string\n\tAmount  int64\n\tTags    []string\n}\n\n" +
		"// Resp is a response.\ntype Resp struct {\n\tID     string\n\tStatus string\n}\n\n// Svc is a service.\ntype Svc struct{}\n"
	atomicMethod = "\n// M%[1]d is method %[1]d.\n//\n//go:generate %[2]s\nfunc (s *Svc) M%[1]d(ctx context.Context, tx pgx.Tx, req Req) (Resp, error) { return Resp{}, nil }\n"
)

// benchSource is a package with n methods of the given shape; method i's
// directive runs command(i).
func benchSource(n int, method string, command func(i int) string) string {
	var src strings.Builder
	if method == atomicMethod {
		src.WriteString(atomicHeader)
	} else {
		src.WriteString(minimalHeader)
	}
	for i := range n {
		fmt.Fprintf(&src, method, i, command(i))
	}
	return src.String()
}

func benchGenerate(b *testing.B, method string, lowerBound bool) {
	path := benchToolPath(b)
	if lowerBound {
		path = noopPath(b, path)
	}
	command := func(i int) string {
		if lowerBound && i > 0 {
			return "noop"
		}
		return "idemgen -v -tests=false -migration-format=plain"
	}
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("directives=%d", n), func(b *testing.B) {
			src := benchSource(n, method, command)
			dir := testmod.New(b, "bench", map[string][]byte{"svc/svc.go": []byte(src)})
			file := filepath.Join(dir, "svc", "svc.go")
			loads := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A source change, so the run must regenerate.
				if err := os.WriteFile(file, fmt.Appendf(nil, "%s\n// run %d\n", src, i), 0o644); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r := sh(b, dir, path, nil, "go", "generate", "./...")
				if r.code != 0 {
					b.Fatalf("go generate: %s", r.stderr)
				}
				loads += strings.Count(r.stderr, "type-checked in ")
			}
			b.ReportMetric(float64(loads)/float64(b.N), "loads/op")
		})
	}
}

// benchToolPath builds idemgen itself (not this larger test binary, whose
// start-up would inflate every directive) and returns a PATH that finds it.
func benchToolPath(b *testing.B) string {
	bin := b.TempDir()
	r := sh(b, filepath.Join(testmod.RepoRoot(b), "cmd", "idemgen"), os.Getenv("PATH"), nil, "go", "build", "-o", filepath.Join(bin, "idemgen"), ".")
	if r.code != 0 {
		b.Fatalf("build idemgen: %s", r.stderr)
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// BenchmarkGoGenerateFloor: every directive runs `true`.
func BenchmarkGoGenerateFloor(b *testing.B) {
	benchFloor(b, "true", os.Getenv("PATH"))
}

// BenchmarkGoGenerateFloorGo: every directive runs an empty Go program.
func BenchmarkGoGenerateFloorGo(b *testing.B) {
	benchFloor(b, "noop", noopPath(b, os.Getenv("PATH")))
}

// noopPath builds an empty Go program named noop and returns path with its
// directory first.
func noopPath(b *testing.B, path string) string {
	bin := b.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "go.mod"), []byte("module noop\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if r := sh(b, bin, os.Getenv("PATH"), nil, "go", "build", "-o", "noop", "."); r.code != 0 {
		b.Fatalf("build noop: %s", r.stderr)
	}
	return bin + string(os.PathListSeparator) + path
}

// benchFloor times go generate on the minimal package with every directive
// running command.
func benchFloor(b *testing.B, command, path string) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("directives=%d", n), func(b *testing.B) {
			src := benchSource(n, minimalMethod, func(int) string { return command })
			dir := testmod.New(b, "floor", map[string][]byte{"svc/svc.go": []byte(src)})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r := sh(b, dir, path, nil, "go", "generate", "./..."); r.code != 0 {
					b.Fatalf("go generate: %s", r.stderr)
				}
			}
		})
	}
}
