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
// BenchmarkGoGenerateFloor is the same package with every directive running
// `true` instead: what go generate itself costs to start 1, 10 and 50
// processes, the part of the figures idemgen cannot remove.
//
//	go test ./cmd/idemgen -run '^$' -bench GoGenerate -benchtime 5x
func BenchmarkGoGenerate(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("directives=%d", n), func(b *testing.B) {
			var src strings.Builder
			src.WriteString("package svc\n\nimport \"context\"\n\n// Svc is a service.\ntype Svc struct{}\n")
			for i := range n {
				fmt.Fprintf(&src, "\n// M%d is method %d.\n//\n//go:generate idemgen -v -tests=false -migration-format=plain\nfunc (s *Svc) M%d(ctx context.Context, id string, n int) error { return nil }\n", i, i, i)
			}
			dir := testmod.New(b, "bench", map[string][]byte{"svc/svc.go": []byte(src.String())})
			path := benchToolPath(b)
			file := filepath.Join(dir, "svc", "svc.go")
			loads := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A source change, so the run must regenerate.
				if err := os.WriteFile(file, fmt.Appendf(nil, "%s\n// run %d\n", src.String(), i), 0o644); err != nil {
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

func BenchmarkGoGenerateFloor(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("directives=%d", n), func(b *testing.B) {
			var src strings.Builder
			src.WriteString("package svc\n\nimport \"context\"\n\n// Svc is a service.\ntype Svc struct{}\n")
			for i := range n {
				fmt.Fprintf(&src, "\n// M%d is method %d.\n//\n//go:generate true\nfunc (s *Svc) M%d(ctx context.Context, id string, n int) error { return nil }\n", i, i, i)
			}
			dir := testmod.New(b, "floor", map[string][]byte{"svc/svc.go": []byte(src.String())})
			path := os.Getenv("PATH")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r := sh(b, dir, path, nil, "go", "generate", "./..."); r.code != 0 {
					b.Fatalf("go generate: %s", r.stderr)
				}
			}
		})
	}
}
